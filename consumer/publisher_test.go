package consumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
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

// The publisher of WithDeadLetterPublisher is built by Start from the Config, takes the dead letters, and is
// closed by Shutdown.
func TestDeadLetterPublisher_IsBuiltAtStartAndClosedAtShutdown(t *testing.T) {
	sink := &recordingSink{}
	var built []consumer.Config
	publisher := func(cfg consumer.Config) (consumer.DeadLetterSink, error) {
		built = append(built, cfg)
		return sink, nil
	}
	c, fp := newConsumer(t, validConfig(), handlerReturning(consumer.DeadLetter("bad order"), nil),
		consumer.WithDeadLetterPublisher(publisher))
	assert.Empty(t, built, "New builds nothing")
	require.NoError(t, c.Start())
	require.Len(t, built, 1)
	assert.Equal(t, validConfig().Group, built[0].Group)
	assert.Equal(t, validConfig().NameServers, built[0].NameServers)

	msg := orderMsg("k1")
	result, _ := fp.deliver(t, "ORDER", msg)
	assert.Equal(t, rmq.ConsumeSuccess, result, "the letter was published, so the message is acknowledged")
	require.Len(t, sink.letters, 1)
	assert.Contains(t, sink.letters[0], "bad order")

	require.NoError(t, c.Shutdown(context.Background()))
	assert.Equal(t, 1, sink.closed)
}

// The publisher's error fails Start before the client starts; a Start that fails after the publisher was
// built closes it.
func TestDeadLetterPublisher_ErrorsFailStartAndLeaveNothingOpen(t *testing.T) {
	refused := errors.New("name server refused")
	c, fp := newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil),
		consumer.WithDeadLetterPublisher(func(consumer.Config) (consumer.DeadLetterSink, error) { return nil, refused }))
	err := c.Start()
	require.ErrorIs(t, err, refused)
	assert.Contains(t, err.Error(), "dead-letter publisher")
	assert.NotContains(t, fp.Calls(), "start")
	require.NoError(t, c.Shutdown(context.Background()))

	sink := &recordingSink{}
	c, fp = newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil),
		consumer.WithDeadLetterPublisher(func(consumer.Config) (consumer.DeadLetterSink, error) { return sink, nil }))
	fp.startErr = errors.New("no route")
	require.ErrorIs(t, c.Start(), fp.startErr)
	assert.Equal(t, 1, sink.closed, "the client did not start: the publisher built for it is closed")
}

// Wiring mistakes around the sink fail New, naming the option: both sink options, or a nil sink behind the
// interface (the result of a StartPublisher whose error was dropped).
func TestNew_SinkWiringMistakesFail(t *testing.T) {
	publisher := func(consumer.Config) (consumer.DeadLetterSink, error) { return &recordingSink{}, nil }
	var dropped *recordingSink // what `p, _ := build()` leaves when build fails
	for name, tc := range map[string]struct {
		opts  []consumer.Option
		field string
	}{
		"both":          {[]consumer.Option{consumer.WithDeadLetterSink(&recordingSink{}), consumer.WithDeadLetterPublisher(publisher)}, "WithDeadLetterSink"},
		"typed nil":     {[]consumer.Option{consumer.WithDeadLetterSink(dropped)}, "WithDeadLetterSink"},
		"nil publisher": {[]consumer.Option{consumer.WithDeadLetterPublisher(nil)}, "WithDeadLetterPublisher"},
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
	c, fp = newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil),
		consumer.WithDeadLetterPublisher(func(consumer.Config) (consumer.DeadLetterSink, error) { return sink, nil }))
	fp.startErr = errors.New("no route")
	require.ErrorIs(t, c.Run(context.Background()), fp.startErr, "returns at once: the context never ends")
	assert.Equal(t, 1, sink.closed)
	assert.ErrorIs(t, c.Start(), consumer.ErrStopped, "the failed Run shut the consumer down")
}

// A second Start whose client start fails must not close the publisher the first Start built: the running
// consumer still sends its dead letters through it.
func TestDeadLetterPublisher_FailedSecondStartKeepsTheRunningConsumersPublisher(t *testing.T) {
	sink := &recordingSink{}
	built := 0
	c, fp := newConsumer(t, validConfig(), handlerReturning(consumer.DeadLetter("bad order"), nil),
		consumer.WithDeadLetterPublisher(func(consumer.Config) (consumer.DeadLetterSink, error) { built++; return sink, nil }))
	require.NoError(t, c.Start())
	fp.startErr = errors.New("no route")
	require.ErrorIs(t, c.Start(), fp.startErr)
	assert.Equal(t, 1, built, "the second Start keeps the sink")
	assert.Zero(t, sink.closed, "the running consumer's publisher stays open")

	result, _ := fp.deliver(t, "ORDER", orderMsg("k1"))
	assert.Equal(t, rmq.ConsumeSuccess, result)
	assert.Len(t, sink.letters, 1, "the letter went through the publisher")
	require.NoError(t, c.Shutdown(context.Background()))
	assert.Equal(t, 1, sink.closed)
}
