package consumer_test

import (
	"context"
	"errors"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
)

func TestNew_RefusedHandlerIsItsErrorAndBuildsNoClient(t *testing.T) {
	errX := errors.New("dedup store is nil")
	called := false
	factory := consumer.WithPushConsumer(func([]rmq.Option) (consumer.PushConsumer, error) {
		called = true
		return newFakePush(), nil
	})

	c, err := consumer.New(validConfig(), consumer.Refuse(errX), factory)

	require.ErrorIs(t, err, errX)
	assert.Nil(t, c)
	assert.Equal(t, "consumer.New: handler: dedup store is nil", err.Error())
	assert.False(t, called, "no client is built for a refused handler")
}

func TestNew_NeverCallsAPlainHandler(t *testing.T) {
	calls := 0
	h := func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		calls++
		return consumer.Processed(), nil
	}
	factory := consumer.WithPushConsumer(func([]rmq.Option) (consumer.PushConsumer, error) { return newFakePush(), nil })

	c, err := consumer.New(validConfig(), h, factory)

	require.NoError(t, err)
	require.NotNil(t, c)
	assert.Zero(t, calls)
	assert.NoError(t, consumer.Refused(h))
}

func TestRefuse_OnAMessageIsADeadLetterWithTheReason(t *testing.T) {
	h := consumer.Refuse(errors.New("middleware.Dedup: store is nil"))

	o, err := h(context.Background(), consumer.NewDelivery("cg", orderMsg("k-1")))

	require.NoError(t, err, "a dead letter, not a retry")
	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Equal(t, "handler could not be built: middleware.Dedup: store is nil", o.Reason)
}

func TestRefuse_NilErrorStillRefuses(t *testing.T) {
	assert.Error(t, consumer.Refused(consumer.Refuse(nil)))
}
