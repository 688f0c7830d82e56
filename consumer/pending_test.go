package consumer_test

import (
	"context"
	"errors"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/pending"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

func TestNew_RefusedHandlerIsItsErrorAndBuildsNoClient(t *testing.T) {
	errX := errors.New("dedup store is nil")
	called := false
	factory := consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) {
		called = true
		return newFakePush(), nil
	})

	c, err := consumer.New(validConfig(), pending.Refuse[consumer.Delivery](errX, consumer.DeadLetter), factory)

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
	factory := consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) { return newFakePush(), nil })

	c, err := consumer.New(validConfig(), consumer.HandlerFunc(h), factory)

	require.NoError(t, err)
	require.NotNil(t, c)
	assert.Zero(t, calls)
	assert.NoError(t, pending.Refused(consumer.HandlerFunc(h)))
}

func TestRefuse_OnAMessageIsADeadLetterWithTheReason(t *testing.T) {
	h := pending.Refuse[consumer.Delivery](errors.New("middleware.Dedup: store is nil"), consumer.DeadLetter)

	o, err := h.Handle(context.Background(), testenv.NewDelivery("cg", orderMsg("k-1")))

	require.NoError(t, err, "a dead letter, not a retry")
	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Equal(t, "handler could not be built: middleware.Dedup: store is nil", o.Reason)
}

func TestRefuse_NilErrorStillRefuses(t *testing.T) {
	assert.Error(t, pending.Refused(pending.Refuse[consumer.Delivery](nil, consumer.DeadLetter)))
}

func TestPending_RunsTheHandlerButNewRefusesIt(t *testing.T) {
	errX := errors.New("middleware.Dedup (position 1) needs middleware.EventID before it")
	runs := 0
	h := pending.Wrap(consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		runs++
		return consumer.Processed(), nil
	}), errX)
	factory := consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) {
		t.Error("a client was built for a pending handler")
		return newFakePush(), nil
	})

	c, err := consumer.New(validConfig(), h, factory)
	require.ErrorIs(t, err, errX)
	assert.Nil(t, c)
	assert.Equal(t, "consumer.New: handler: "+errX.Error(), err.Error())
	assert.Zero(t, runs, "New does not run the handler")

	o, err := h.Handle(context.Background(), testenv.NewDelivery("cg", orderMsg("k-1")))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind, "on a message it runs, it is not a dead letter")
	assert.Equal(t, 1, runs)
}

func TestPending_NilErrorStillRefuses(t *testing.T) {
	assert.Error(t, pending.Refused(pending.Wrap(consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil
	}), nil)))
}
