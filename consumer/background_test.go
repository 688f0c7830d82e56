package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
)

// A WithBackground function (the outbox relay) runs from Start until Shutdown, is cancelled only after
// the drain — the last handler's commit still wakes a running relay — and has returned when Shutdown does.
func TestWithBackground_RunsFromStartAndStopsAfterTheDrain(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{})
	var handlerDone atomic.Bool
	h := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		close(entered)
		<-release
		handlerDone.Store(true)
		return consumer.Processed(), nil
	}
	started := make(chan struct{})
	var doneAtCancel, returned atomic.Bool
	bg := func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		doneAtCancel.Store(handlerDone.Load())
		returned.Store(true)
		return nil
	}
	cfg := validConfig()
	cfg.DrainTimeout = 10 * time.Second
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(h), consumer.WithBackground(bg))
	require.NoError(t, c.Start())
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the background function did not start with Start")
	}
	delivered := make(chan struct{})
	go func() { defer close(delivered); fp.deliver(t, "ORDER", orderMsg("k1")) }()
	shut := make(chan error, 1)
	<-entered
	go func() { shut <- c.Shutdown(context.Background()) }()
	<-fp.suspended
	time.Sleep(200 * time.Millisecond)
	require.False(t, returned.Load(), "cancelled while a handler was still in flight")
	close(release)
	require.NoError(t, <-shut)
	<-delivered
	require.True(t, returned.Load(), "Shutdown returned before the background function did")
	require.True(t, doneAtCancel.Load(), "cancelled before the drain ended")
}
