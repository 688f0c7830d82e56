package consumer_test

import (
	"context"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// The retries that Recover and Timeout decide ask for delay level 0, so the broker picks the delay from
// ReconsumeTimes (1 s, 5 s, 10 s, … on a default broker): a panicking or hung handler backs off like any
// other failure, and is never dead-lettered at once (-1). This is what the client's
// ConsumeConcurrentlyContext receives.
func TestConsume_F2_F7_RecoverAndTimeoutRetriesLeaveTheDelayToTheBroker(t *testing.T) {
	panics := func(context.Context, *consumer.Delivery) (consumer.Outcome, error) { panic("boom") }
	hangs := func(ctx context.Context, _ *consumer.Delivery) (consumer.Outcome, error) {
		<-ctx.Done()
		return consumer.Outcome{}, ctx.Err()
	}
	for name, h := range map[string]consumer.Handler{
		"panic under Recover":             testenv.Must(middleware.Chain(consumer.HandlerFunc(panics), middleware.Recover(zap.NewNop()))),
		"panic under Timeout":             testenv.Must(middleware.Chain(consumer.HandlerFunc(panics), middleware.Timeout(time.Hour))),
		"panic under Timeout in Recover":  testenv.Must(middleware.Chain(consumer.HandlerFunc(panics), middleware.Recover(zap.NewNop()), middleware.Timeout(time.Hour))),
		"deadline of Timeout":             testenv.Must(middleware.Chain(consumer.HandlerFunc(hangs), middleware.Timeout(10*time.Millisecond))),
		"deadline of Timeout in Classify": testenv.Must(middleware.Chain(consumer.HandlerFunc(hangs), middleware.Classify(), middleware.Timeout(10*time.Millisecond))),
		"panic under Classify":            testenv.Must(middleware.Chain(consumer.HandlerFunc(panics), middleware.Recover(zap.NewNop()), middleware.Classify(), middleware.Timeout(time.Hour))),
	} {
		t.Run(name, func(t *testing.T) {
			_, fp := newConsumer(t, validConfig(), h)

			res, delay := fp.deliver(t, "ORDER", orderMsg("o-1"))

			assert.Equal(t, rmq.ConsumeRetryLater, res)
			assert.Equal(t, 0, delay, "delay level 0: the broker's schedule by ReconsumeTimes")
		})
	}
}
