package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
)

// recorder is a Handler that records each delivery and answers with decide.
type recorder struct {
	mu     sync.Mutex
	got    []consumer.Delivery
	decide func(d *consumer.Delivery) (consumer.Outcome, error)
}

func (r *recorder) handle(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
	r.mu.Lock()
	r.got = append(r.got, *d)
	r.mu.Unlock()
	return r.decide(d)
}

func (r *recorder) deliveries() []consumer.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]consumer.Delivery(nil), r.got...)
}

func TestConsume_F1_HandlerErrorIsRetryLater(t *testing.T) {
	for name, o := range map[string]consumer.Outcome{"unset": {}, "processed": consumer.Processed(), "duplicate": consumer.Duplicate()} {
		t.Run(name, func(t *testing.T) {
			_, fp := newConsumer(t, validConfig(), handlerReturning(o, errors.New("db down")))

			res, delay := fp.deliver(t, "ORDER", orderMsg("o-1"))

			assert.Equal(t, rmq.ConsumeRetryLater, res, "an error never acknowledges")
			assert.Equal(t, 0, delay, "the broker picks the delay from ReconsumeTimes")
		})
	}
}

func TestConsume_F1_ZeroOutcomeWithoutErrorIsRetryLater(t *testing.T) {
	_, fp := newConsumer(t, validConfig(), handlerReturning(consumer.Outcome{}, nil))

	res, _ := fp.deliver(t, "ORDER", orderMsg("o-1"))

	assert.Equal(t, rmq.ConsumeRetryLater, res)
}

func TestConsume_SuccessKindsAreAcknowledged(t *testing.T) {
	for _, o := range []consumer.Outcome{consumer.Processed(), consumer.Duplicate(), consumer.Stale("v5 < v7")} {
		t.Run(fmt.Sprint(o.Kind, " ", o.Reason), func(t *testing.T) {
			_, fp := newConsumer(t, validConfig(), handlerReturning(o, nil))
			res, _ := fp.deliver(t, "ORDER", orderMsg("o-1"))
			assert.Equal(t, rmq.ConsumeSuccess, res)
		})
	}
}

func TestConsume_RetryDelayLevelReachesTheContext(t *testing.T) {
	_, fp := newConsumer(t, validConfig(), handlerReturning(consumer.Retry(3, "busy"), nil))

	res, delay := fp.deliver(t, "ORDER", orderMsg("o-1"))

	assert.Equal(t, rmq.ConsumeRetryLater, res)
	assert.Equal(t, 3, delay)
}

func TestConsume_DeadLetterWithoutSinkUsesBrokerDLQ(t *testing.T) {
	_, fp := newConsumer(t, validConfig(), handlerReturning(consumer.DeadLetter("invalid payload"), errors.New("invalid payload")))

	res, delay := fp.deliver(t, "ORDER", orderMsg("o-1"))

	assert.Equal(t, rmq.ConsumeRetryLater, res)
	assert.Equal(t, consumer.DelayLevelDLQ, delay)
}

func TestConsume_F6_DeadLetterSinkSuccessAcknowledges(t *testing.T) {
	sink := &fakeSink{}
	_, fp := newConsumer(t, validConfig(), handlerReturning(consumer.DeadLetter("invalid payload"), nil), consumer.WithDeadLetterSink(sink))

	res, _ := fp.deliver(t, "ORDER", orderMsg("o-1"))

	assert.Equal(t, rmq.ConsumeSuccess, res, "acknowledged only because the DLQ copy was accepted")
	assert.Equal(t, []string{"invalid payload"}, sink.reasons)
	assert.Equal(t, []string{"o-1"}, sink.events)
}

func TestConsume_F6_DeadLetterReasonFallsBackToTheError(t *testing.T) {
	sink := &fakeSink{}
	_, fp := newConsumer(t, validConfig(), handlerReturning(consumer.Outcome{Kind: consumer.KindDeadLetter}, errors.New("unknown event type Foo")),
		consumer.WithDeadLetterSink(sink))

	res, _ := fp.deliver(t, "ORDER", orderMsg("o-1"))

	assert.Equal(t, rmq.ConsumeSuccess, res)
	assert.Equal(t, []string{"unknown event type Foo"}, sink.reasons)
}

func TestConsume_F6_DeadLetterSinkFailureNeverAcks(t *testing.T) {
	sink := &fakeSink{err: errDLQSend}
	_, fp := newConsumer(t, validConfig(), handlerReturning(consumer.DeadLetter("invalid payload"), nil), consumer.WithDeadLetterSink(sink))

	res, delay := fp.deliver(t, "ORDER", orderMsg("o-1"))

	assert.Equal(t, rmq.ConsumeRetryLater, res, "a failed DLQ publish must not acknowledge")
	assert.Equal(t, consumer.DelayLevelDLQ, delay, "falls back to the broker's own dead-lettering")
	assert.Len(t, sink.reasons, 1)
}

func TestConsume_SinkOnlyForDeadLetters(t *testing.T) {
	sink := &fakeSink{}
	_, fp := newConsumer(t, validConfig(), handlerReturning(consumer.Retry(0, "later"), errors.New("db down")), consumer.WithDeadLetterSink(sink))

	res, _ := fp.deliver(t, "ORDER", orderMsg("o-1"))

	assert.Equal(t, rmq.ConsumeRetryLater, res)
	assert.Empty(t, sink.reasons)
}

func TestConsume_F4_HandlerSeesRestoredTopicAndAttempt(t *testing.T) {
	r := &recorder{decide: func(*consumer.Delivery) (consumer.Outcome, error) { return consumer.Processed(), nil }}
	_, fp := newConsumer(t, validConfig(), consumer.HandlerFunc(r.handle))
	m := orderMsg("o-1")
	m.Topic = "%RETRY%cg"
	m.WithProperty(primitive.PropertyRetryTopic, "ORDER")
	m.ReconsumeTimes = 2

	res, _ := fp.deliver(t, "ORDER", m)

	assert.Equal(t, rmq.ConsumeSuccess, res)
	got := r.deliveries()
	require.Len(t, got, 1)
	assert.Equal(t, "ORDER", got[0].Topic)
	assert.Equal(t, 2, got[0].Attempt)
	assert.Equal(t, "cg", got[0].Group)
}

func TestConsume_F7_HandlerContextHasADeadline(t *testing.T) {
	var hasDeadline bool
	h := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		_, hasDeadline = ctx.Deadline()
		return consumer.Processed(), nil
	}
	_, fp := newConsumer(t, validConfig(), consumer.HandlerFunc(h))

	res, _ := fp.deliver(t, "ORDER", orderMsg("o-1"))

	assert.Equal(t, rmq.ConsumeSuccess, res)
	assert.True(t, hasDeadline, "the client's callback context has none; the framework adds HandlerTimeout")
}

func batch(keys ...string) []*primitive.MessageExt {
	var out []*primitive.MessageExt
	for _, k := range keys {
		out = append(out, orderMsg(k))
	}
	return out
}

func TestConsume_F10_BatchWithOneFailureRetriesTheBatch(t *testing.T) {
	r := &recorder{decide: func(d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetKeys() == "b-3" {
			return consumer.Outcome{}, errors.New("b-3 failed")
		}
		return consumer.Processed(), nil
	}}
	_, fp := newBatchConsumer(t, consumer.HandlerFunc(r.handle))

	res, delay := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3", "b-4")...)

	assert.Equal(t, rmq.ConsumeRetryLater, res, "the client retries a batch as a whole")
	assert.NotEqual(t, consumer.DelayLevelDLQ, delay)
	var keys []string
	for _, d := range r.deliveries() {
		keys = append(keys, d.Msg.GetKeys())
	}
	assert.Equal(t, []string{"b-1", "b-2", "b-3", "b-4"}, keys, "every message is handled on its own, even after a failure")
}

func TestConsume_F10_BatchAllSucceededIsAcknowledged(t *testing.T) {
	r := &recorder{decide: func(d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetKeys() == "b-2" {
			return consumer.Duplicate(), nil
		}
		return consumer.Processed(), nil
	}}
	_, fp := newBatchConsumer(t, consumer.HandlerFunc(r.handle))

	res, _ := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3", "b-4")...)

	assert.Equal(t, rmq.ConsumeSuccess, res)
	assert.Len(t, r.deliveries(), 4)
}

func TestConsume_F10_DeadLetterPublishedBySinkInABatchIsAcknowledged(t *testing.T) {
	sink := &fakeSink{}
	r := &recorder{decide: func(d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetKeys() == "b-3" {
			return consumer.DeadLetter("poison"), nil
		}
		return consumer.Processed(), nil
	}}
	_, fp := newBatchConsumer(t, consumer.HandlerFunc(r.handle), consumer.WithDeadLetterSink(sink))

	res, _ := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3", "b-4")...)

	assert.Equal(t, rmq.ConsumeSuccess, res)
	assert.Equal(t, []string{"b-3"}, sink.events)
}

// A retried batch is delivered again, so a dead letter in it is not published now: it would be published
// once per redelivery. It is published when its batch is acknowledged.
func TestConsume_F10_DeadLetterInARetriedBatchIsNotPublished(t *testing.T) {
	sink := &fakeSink{}
	r := &recorder{decide: func(d *consumer.Delivery) (consumer.Outcome, error) {
		switch d.Msg.GetKeys() {
		case "b-3":
			return consumer.DeadLetter("poison"), nil
		case "b-4":
			return consumer.Outcome{}, errors.New("db down")
		}
		return consumer.Processed(), nil
	}}
	_, fp := newBatchConsumer(t, consumer.HandlerFunc(r.handle), consumer.WithDeadLetterSink(sink))

	res, delay := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3", "b-4")...)

	assert.Equal(t, rmq.ConsumeRetryLater, res)
	assert.Zero(t, delay, "a batch is never dead-lettered as a whole")
	assert.Empty(t, sink.events, "not published while the batch is retried")
}

func TestConsume_F10_RetriedBatchKeepsTheLargestDelayLevel(t *testing.T) {
	r := &recorder{decide: func(d *consumer.Delivery) (consumer.Outcome, error) {
		switch d.Msg.GetKeys() {
		case "b-2":
			return consumer.Retry(5, "rate limited"), nil
		case "b-3":
			return consumer.Retry(2, "busy"), nil
		}
		return consumer.Processed(), nil
	}}
	_, fp := newBatchConsumer(t, consumer.HandlerFunc(r.handle))

	res, delay := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3", "b-4")...)

	assert.Equal(t, rmq.ConsumeRetryLater, res)
	assert.Equal(t, 5, delay)
}

func TestStart_CallsTheClientAndWrapsItsError(t *testing.T) {
	c, fp := newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil))
	require.NoError(t, c.Start())
	assert.Contains(t, fp.Calls(), "start")

	c2, fp2 := newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil))
	fp2.startErr = errors.New("no route info of topic ORDER")
	err := c2.Start()
	require.ErrorIs(t, err, fp2.startErr)
}

// asyncResult is what a callback invoked on another goroutine returned.
type asyncResult struct {
	res   rmq.ConsumeResult
	delay int
	err   error
}

// deliverAsync invokes topic's callback on a new goroutine, as the client's consume goroutine would.
func deliverAsync(fp *fakePush, topic string, msgs ...*primitive.MessageExt) <-chan asyncResult {
	fp.mu.Lock()
	cb := fp.callbacks[topic]
	fp.mu.Unlock()
	out := make(chan asyncResult, 1)
	go func() {
		cc := primitive.NewConsumeConcurrentlyContext()
		res, err := cb(primitive.WithConcurrentlyCtx(context.Background(), cc), msgs...)
		out <- asyncResult{res, cc.DelayLevelWhenNextConsume, err}
	}()
	return out
}

// blockingHandler blocks each call until release is closed or its context ends, and records why it
// stopped. started receives one value per call as it begins.
type blockingHandler struct {
	started chan string
	release chan struct{}
	ctxErr  chan error
	fp      *fakePush
	mu      sync.Mutex
	handled int
	outcome consumer.Outcome
}

func newBlockingHandler() *blockingHandler {
	return &blockingHandler{started: make(chan string, 8), release: make(chan struct{}), ctxErr: make(chan error, 8), outcome: consumer.Processed()}
}

func (b *blockingHandler) handle(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
	b.mu.Lock()
	b.handled++
	b.mu.Unlock()
	b.started <- d.Msg.GetKeys()
	defer b.fp.record("handler returned " + d.Msg.GetKeys())
	select {
	case <-b.release:
		b.ctxErr <- nil
		return b.outcome, nil
	case <-ctx.Done():
		b.ctxErr <- ctx.Err()
		return consumer.Outcome{}, ctx.Err()
	}
}

func (b *blockingHandler) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.handled
}

func TestShutdown_F9_DrainTimeoutCancelsInFlightHandlers(t *testing.T) {
	b := newBlockingHandler()
	cfg := validConfig()
	cfg.DrainTimeout = 50 * time.Millisecond
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(b.handle))
	b.fp = fp
	require.NoError(t, c.Start())

	result := deliverAsync(fp, "ORDER", orderMsg("o-1"))
	require.Equal(t, "o-1", <-b.started)

	err := c.Shutdown(context.Background())

	require.ErrorIs(t, err, context.DeadlineExceeded, "handlers had to be cancelled")
	assert.ErrorIs(t, <-b.ctxErr, context.Canceled, "the in-flight handler's context is cancelled when the drain timeout passes")
	r := <-result
	assert.ErrorIs(t, r.err, consumer.ErrStopped, "not answered: the client discards the result of a callback it has shut down")
	assert.Equal(t, rmq.ConsumeRetryLater, r.res, "a cancelled handler's message is never acknowledged")
	assert.Zero(t, r.delay, "never dead-lettered")
	assert.Equal(t, []string{"subscribe ORDER", "start", "suspend", "handler returned o-1", "shutdown"}, fp.Calls(),
		"suspend first; the client is shut down only after the cancelled handler returned")
}

// A handler whose transaction committed as Shutdown cancelled its context reports success: its message is
// acknowledged, not left for a redelivery after the restart. Only a cancelled handler that did not succeed
// goes unanswered.
func TestShutdown_F9_HandlerThatSucceededDespiteCancellationIsAcknowledged(t *testing.T) {
	started := make(chan struct{})
	h := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		close(started)
		<-ctx.Done()
		return consumer.Processed(), nil // committed before it noticed the cancellation
	}
	cfg := validConfig()
	cfg.DrainTimeout = 50 * time.Millisecond
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(h))
	result := deliverAsync(fp, "ORDER", orderMsg("o-1"))
	<-started

	require.ErrorIs(t, c.Shutdown(context.Background()), context.DeadlineExceeded)

	r := <-result
	require.NoError(t, r.err, "answered: the client gets the result before it is shut down")
	assert.Equal(t, rmq.ConsumeSuccess, r.res)
}

// A handler that returns a success kind with an error after cancellation has not succeeded (an error never
// acknowledges): like any cancelled failure it is not answered, so its attempt is not spent.
func TestShutdown_F9_CancelledHandlerWithSuccessKindAndErrorIsNotAnswered(t *testing.T) {
	started := make(chan struct{})
	h := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		close(started)
		<-ctx.Done()
		return consumer.Processed(), ctx.Err()
	}
	cfg := validConfig()
	cfg.DrainTimeout = 50 * time.Millisecond
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(h))
	result := deliverAsync(fp, "ORDER", orderMsg("o-1"))
	<-started

	require.ErrorIs(t, c.Shutdown(context.Background()), context.DeadlineExceeded)

	r := <-result
	assert.ErrorIs(t, r.err, consumer.ErrStopped, "not answered: redelivered after a restart as it was")
	assert.Equal(t, rmq.ConsumeRetryLater, r.res)
}

func TestShutdown_F9_WaitsForInFlightHandlersToFinish(t *testing.T) {
	b := newBlockingHandler()
	cfg := validConfig()
	cfg.DrainTimeout = time.Hour // the handler is released long before; no timing is asserted
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(b.handle))
	b.fp = fp
	require.NoError(t, c.Start())

	first := deliverAsync(fp, "ORDER", orderMsg("o-1"))
	require.Equal(t, "o-1", <-b.started)

	shutdownErr := make(chan error, 1)
	go func() { shutdownErr <- c.Shutdown(context.Background()) }()
	<-fp.suspended // Shutdown has begun

	// A delivery that arrives while shutting down (a message the client had already fetched) does not run
	// the handler and does not answer until the client is shut down, so the client discards its result:
	// it is neither acknowledged nor sent back with ReconsumeTimes raised.
	lateCh := deliverAsync(fp, "ORDER", orderMsg("o-2"))
	select {
	case <-lateCh:
		t.Fatal("a late delivery answered before the client was shut down")
	default:
	}

	close(b.release)
	require.NoError(t, <-shutdownErr, "every in-flight handler finished within the drain timeout")
	late := <-lateCh
	assert.Equal(t, rmq.ConsumeRetryLater, late.res)
	assert.ErrorIs(t, late.err, consumer.ErrStopped)
	assert.Equal(t, 1, b.count(), "the handler did not run for the late delivery")
	assert.NoError(t, <-b.ctxErr, "the finished handler was not cancelled")
	r := <-first
	assert.Equal(t, rmq.ConsumeSuccess, r.res, "the in-flight message committed and is acknowledged")
	assert.Equal(t, []string{"subscribe ORDER", "start", "suspend", "handler returned o-1", "shutdown"}, fp.Calls())
}

func TestShutdown_ContextEndCancelsInFlightHandlers(t *testing.T) {
	b := newBlockingHandler()
	cfg := validConfig()
	cfg.DrainTimeout = time.Hour
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(b.handle))
	b.fp = fp

	result := deliverAsync(fp, "ORDER", orderMsg("o-1"))
	require.Equal(t, "o-1", <-b.started)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	err := c.Shutdown(ctx)

	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, <-b.ctxErr, context.Canceled)
	assert.Equal(t, rmq.ConsumeRetryLater, (<-result).res)
}

func TestShutdown_DeliveryAfterShutdownIsRetriedWithoutTheHandler(t *testing.T) {
	r := &recorder{decide: func(*consumer.Delivery) (consumer.Outcome, error) { return consumer.Processed(), nil }}
	c, fp := newConsumer(t, validConfig(), consumer.HandlerFunc(r.handle))
	require.NoError(t, c.Shutdown(context.Background()))

	late := <-deliverAsync(fp, "ORDER", orderMsg("o-1"))

	assert.Equal(t, rmq.ConsumeRetryLater, late.res)
	assert.ErrorIs(t, late.err, consumer.ErrStopped, "logged by the client; the result is what counts")
	assert.Empty(t, r.deliveries())
	assert.ErrorIs(t, c.Start(), consumer.ErrStopped)
}

func TestShutdown_SuspendsBeforeShutdownAndIsIdempotent(t *testing.T) {
	c, fp := newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil))
	require.NoError(t, c.Start())

	require.NoError(t, c.Shutdown(context.Background()))
	require.NoError(t, c.Shutdown(context.Background()), "calling it twice is safe")

	assert.Equal(t, []string{"subscribe ORDER", "start", "suspend", "shutdown"}, fp.Calls())
}

func TestShutdown_ClientErrorIsReturned(t *testing.T) {
	c, fp := newConsumer(t, validConfig(), handlerReturning(consumer.Processed(), nil))
	fp.shutdownErr = errors.New("persist offsets failed")
	require.NoError(t, c.Start())

	err := c.Shutdown(context.Background())

	require.ErrorIs(t, err, fp.shutdownErr)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "nothing was in flight")
}

// Late callbacks wait for the client's shutdown; if that panics they must still be released.
func TestShutdown_LateCallbackIsReleasedEvenIfTheClientPanicsOnShutdown(t *testing.T) {
	b := newBlockingHandler()
	cfg := validConfig()
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(b.handle))
	b.fp = fp
	fp.shutdownPanic = "client bug"
	require.NoError(t, c.Start())

	first := deliverAsync(fp, "ORDER", orderMsg("o-1"))
	require.Equal(t, "o-1", <-b.started)
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_ = c.Shutdown(context.Background())
	}()
	<-fp.suspended
	late := deliverAsync(fp, "ORDER", orderMsg("o-2"))
	close(b.release)

	assert.Equal(t, "client bug", <-panicked)
	assert.Equal(t, rmq.ConsumeRetryLater, (<-late).res, "the late callback returned")
	assert.Equal(t, rmq.ConsumeSuccess, (<-first).res)
}

// newBatchConsumer is newConsumer with BatchSize 4 (the F10 shape).
func newBatchConsumer(t *testing.T, h consumer.Handler, opts ...consumer.Option) (*consumer.Consumer, *fakePush) {
	t.Helper()
	cfg := validConfig()
	cfg.BatchSize = 4
	return newConsumer(t, cfg, h, opts...)
}
