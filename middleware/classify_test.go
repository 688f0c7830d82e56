package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
)

// atAttempt is a Delivery on its attempt-th delivery of MaxAttempts 3.
func atAttempt(attempt int) *consumer.Delivery {
	d := delivery("ORDER", "", nil)
	d.Attempt, d.MaxAttempts = attempt, 3
	return d
}

// F19/F20: the store down or read-only is never the message's failure, on any delivery.
func TestClassify_F19_F20_InfrastructureIsUnavailableOnEveryDelivery(t *testing.T) {
	for name, cause := range map[string]error{
		"read-only 1290":  fmt.Errorf("dedup: claim: %w", &mysql.MySQLError{Number: 1290}),
		"read-only 1836":  &mysql.MySQLError{Number: 1836},
		"server lost":     &mysql.MySQLError{Number: 2013},
		"too many conns":  &mysql.MySQLError{Number: 1040},
		"refused (BEGIN)": retry.Infrastructure(fmt.Errorf("dedup: begin: %w", syscall.ECONNREFUSED)),
		"invalid conn":    mysql.ErrInvalidConn,
		"marked (COMMIT)": retry.Infrastructure(errors.New("commit failed")),
	} {
		for _, attempt := range []int{0, 3} {
			t.Run(fmt.Sprintf("%s/attempt %d", name, attempt), func(t *testing.T) {
				o, err := middleware.Classify().Wrap(returning(consumer.Outcome{}, cause)).Handle(context.Background(), atAttempt(attempt))

				assert.Equal(t, consumer.KindUnavailable, o.Kind, "never a dead letter, never a spent retry")
				assert.Same(t, cause, err)
				res := testenv.AnswerTo(t, o, err)
				assert.Equal(t, rmq.ConsumeRetryLater, res.Result, "never acknowledged")
				assert.NotEqual(t, testenv.DelayLevelDLQ, res.DelayLevel)
			})
		}
	}
}

func TestClassify_F19_TheMessagesOwnTransientErrorStillExhaustsRetries(t *testing.T) {
	cause := &mysql.MySQLError{Number: 1213}

	o, _ := middleware.Classify().Wrap(returning(consumer.Outcome{}, cause)).Handle(context.Background(), atAttempt(3))

	assert.Equal(t, consumer.KindDeadLetter, o.Kind, "a deadlock is the message's own: the last delivery dead-letters it")
}

func TestClassify_AnInnerUnavailableIsKept(t *testing.T) {
	o, _ := middleware.Classify().Wrap(returning(consumer.Unavailable("store down"), nil)).Handle(context.Background(), atAttempt(3))

	assert.Equal(t, consumer.Unavailable("store down"), o)
}

// A handler cancelled because the consumer is stopping is not dead-lettered on its last delivery.
func TestClassify_CancelledOnTheLastDeliveryIsNeverADeadLetter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	o, err := middleware.Classify().Wrap(returning(consumer.Outcome{}, ctx.Err())).Handle(ctx, atAttempt(3))

	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.ErrorIs(t, err, context.Canceled)
}
