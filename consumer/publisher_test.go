package consumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
)

// recordingSink counts the letters it takes and its closes.
type recordingSink struct {
	letters []string
	closed  int
}

func (s *recordingSink) DeadLetter(_ context.Context, d *consumer.Delivery, reason string) error {
	s.letters = append(s.letters, d.Msg.MsgId+": "+reason)
	return nil
}
func (s *recordingSink) Close() error { s.closed++; return nil }

// The sink of WithDeadLetterSink takes the dead letters instead of the own producer, and is closed by
// Shutdown.
func TestDeadLetterSink_TakesTheLettersAndIsClosedAtShutdown(t *testing.T) {
	sink := &recordingSink{}
	p := &fakeProducer{status: primitive.SendOK}
	c, fp := newConsumer(t, validConfig(), handlerReturning(consumer.DeadLetter("bad order"), nil),
		withProducer(p), consumer.WithDeadLetterSink(sink))
	require.NoError(t, c.Start())

	result, _ := fp.deliver(t, "ORDER", orderMsg("k1"))
	assert.Equal(t, rmq.ConsumeSuccess, result, "the letter was published, so the message is acknowledged")
	require.Len(t, sink.letters, 1)
	assert.Contains(t, sink.letters[0], "bad order")
	assert.Empty(t, p.keys(), "the own producer is not used")

	require.NoError(t, c.Shutdown(context.Background()))
	assert.Equal(t, 1, sink.closed)
}

// A nil sink behind the interface (the result of a StartPublisher whose error was dropped) fails New,
// naming the option.
func TestNew_SinkWiringMistakesFail(t *testing.T) {
	var dropped *recordingSink // what `p, _ := build()` leaves when build fails
	for name, tc := range map[string]struct {
		opts  []consumer.Option
		field string
	}{
		"typed nil": {[]consumer.Option{consumer.WithDeadLetterSink(dropped)}, "WithDeadLetterSink"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := consumer.New(validConfig(), handlerReturning(consumer.Processed(), nil), tc.opts...)
			var cfgErr *consumer.ConfigError
			require.ErrorAs(t, err, &cfgErr)
			assert.Equal(t, tc.field, cfgErr.Field)
		})
	}
}

// Run starts the consumer, consumes until its context ends, then shuts it down; a failed Start is returned
// at once and leaves nothing running.
func TestRun_StartsConsumesAndShutsDownWhenTheContextEnds(t *testing.T) {
	c, fp := newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]string{"subscribe ORDER", "start"}, fp.Calls()) },
		5*time.Second, 5*time.Millisecond)
	result, _ := fp.deliver(t, "ORDER", orderMsg("k1"))
	assert.Equal(t, rmq.ConsumeSuccess, result)

	cancel()
	require.NoError(t, <-done)
	assert.Equal(t, []string{"subscribe ORDER", "start", "suspend", "shutdown"}, fp.Calls())
	require.ErrorIs(t, c.Run(context.Background()), consumer.ErrStopped, "a second Run returns at once: the context never ends")
	assert.Equal(t, []string{"subscribe ORDER", "start", "suspend", "shutdown"}, fp.Calls(), "and touches no client")

	sink := &recordingSink{}
	c, fp = newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil), consumer.WithDeadLetterSink(sink))
	fp.startErr = errors.New("no route")
	require.ErrorIs(t, c.Run(context.Background()), fp.startErr, "returns at once: the context never ends")
	assert.Equal(t, 1, sink.closed)
	assert.ErrorIs(t, c.Start(), consumer.ErrStopped, "the failed Run shut the consumer down")
}

// A second Start whose client start fails must not close the sink: the running consumer still sends its
// dead letters through it.
func TestDeadLetterSink_FailedSecondStartKeepsTheRunningConsumersSink(t *testing.T) {
	sink := &recordingSink{}
	c, fp := newConsumer(t, validConfig(), handlerReturning(consumer.DeadLetter("bad order"), nil),
		consumer.WithDeadLetterSink(sink))
	require.NoError(t, c.Start())
	fp.startErr = errors.New("no route")
	require.ErrorIs(t, c.Start(), fp.startErr)
	assert.Zero(t, sink.closed, "the running consumer's publisher stays open")

	result, _ := fp.deliver(t, "ORDER", orderMsg("k1"))
	assert.Equal(t, rmq.ConsumeSuccess, result)
	assert.Len(t, sink.letters, 1, "the letter went through the publisher")
	require.NoError(t, c.Shutdown(context.Background()))
	assert.Equal(t, 1, sink.closed)
}
