package consumer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/pending"
)

// store is a fake store the handler and the probe share: down until up is called.
type store struct {
	down   atomic.Bool
	probes atomic.Int32
	runs   atomic.Int32
	// probed receives a value for every failed probe (buffered, never blocks the prober).
	probed chan struct{}
}

func newStore() *store {
	s := &store{probed: make(chan struct{}, 1000)}
	s.down.Store(true)
	return s
}

func (s *store) Probe(ctx context.Context) error {
	s.probes.Add(1)
	if s.down.Load() {
		s.probed <- struct{}{}
		return errors.New("dial tcp: connection refused")
	}
	return nil
}

// handle is a handler that reports the store unavailable while it is down, else processes the message.
func (s *store) handle(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
	s.runs.Add(1)
	if s.down.Load() {
		return consumer.Unavailable("connection refused"), errors.New("dial tcp: connection refused")
	}
	return consumer.Processed(), nil
}

func count(calls []string, call string) int {
	n := 0
	for _, c := range calls {
		if c == call {
			n++
		}
	}
	return n
}

func TestGate_F19_TripsOnceAndResumesOnceUnderManyConcurrentUnavailableCallbacks(t *testing.T) {
	s := newStore()
	obs := &fakeObserver{}
	core, logs := observer.New(zapcore.InfoLevel)
	c, fp := newConsumer(t, validConfig(), consumer.HandlerFunc(s.handle), consumer.WithHealthProbe(s), consumer.WithObserver(obs),
		consumer.WithLogger(zap.New(core)))
	require.NoError(t, c.Start())

	const n = 20
	var results []<-chan asyncResult
	for i := range n {
		results = append(results, deliverAsync(fp, "ORDER", orderMsg("o-"+string(rune('a'+i)))))
	}
	<-fp.suspended
	<-s.probed // the prober found the store down at least once while the callbacks waited
	s.down.Store(false)

	for _, r := range results {
		res := <-r
		require.NoError(t, res.err)
		assert.Equal(t, rmq.ConsumeSuccess, res.res, "handled again after the store came back: no attempt spent")
	}
	require.NoError(t, c.Shutdown(context.Background()))

	calls := fp.Calls()
	assert.Equal(t, 2, count(calls, "suspend"), "one Suspend by the gate, one by Shutdown: %v", calls)
	assert.Equal(t, 1, count(calls, "resume"), "one Resume: %v", calls)
	assert.Equal(t, 1, logs.FilterMessageSnippet("consumption paused").FilterLevelExact(zapcore.WarnLevel).Len(), "one warning for the pause")
	assert.Equal(t, 1, logs.FilterMessageSnippet("consumption resumed").Len(), "one line for the resumption")
	paused, unpaused := obs.counts()
	assert.Equal(t, 1, paused)
	assert.Equal(t, 1, unpaused)
	runs := s.runs.Load()
	assert.GreaterOrEqual(t, runs, int32(n+1), "every message ran once after the recovery")
	assert.LessOrEqual(t, runs, int32(2*n), "no hot loop: at most one failed run per message before it waited")
	assert.Less(t, s.probes.Load(), int32(100), "the prober backs off")
}

func TestGate_F19_CallbacksForFetchedMessagesWaitInsteadOfHittingTheStore(t *testing.T) {
	s := newStore()
	c, fp := newConsumer(t, validConfig(), consumer.HandlerFunc(s.handle), consumer.WithHealthProbe(s))
	first := deliverAsync(fp, "ORDER", orderMsg("o-1"))
	<-fp.suspended
	late := deliverAsync(fp, "ORDER", orderMsg("o-2")) // already fetched when pulling was suspended
	<-s.probed
	<-s.probed // two probes: o-2's callback had time to run its handler, had it not waited
	assert.Equal(t, int32(1), s.runs.Load(), "o-2 waits at the gate; only o-1's first run reached the store")
	s.down.Store(false)

	assert.Equal(t, rmq.ConsumeSuccess, (<-first).res)
	assert.Equal(t, rmq.ConsumeSuccess, (<-late).res)
	assert.Equal(t, int32(3), s.runs.Load(), "o-1 twice, o-2 once")
	require.NoError(t, c.Shutdown(context.Background()))
}

func TestGate_F19_WaitPastOutageWaitIsRetryLater(t *testing.T) {
	s := newStore()
	cfg := validConfig()
	cfg.HandlerTimeout = time.Second
	cfg.OutageWait = 300 * time.Millisecond
	m := orderMsg("o-1")
	m.ReconsumeTimes = 16
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(s.handle), consumer.WithHealthProbe(s))

	res, delay := fp.deliver(t, "ORDER", m)

	assert.Equal(t, rmq.ConsumeRetryLater, res, "past OutageWait the broker is asked to redeliver")
	assert.Zero(t, delay, "never DelayLevelDLQ: the broker decides from ReconsumeTimes")
	assert.Equal(t, int32(1), s.runs.Load(), "no re-run while the store stayed down")
	require.NoError(t, c.Shutdown(context.Background()))
	assert.NotContains(t, fp.Calls(), "resume", "a suspended client being shut down is never resumed")
}

func TestShutdown_F19_WhilePausedNeitherHangsNorResumes(t *testing.T) {
	s := newStore()
	obs := &fakeObserver{}
	cfg := validConfig()
	cfg.DrainTimeout = time.Hour // the waiting callback must not hold the drain
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(s.handle), consumer.WithHealthProbe(s), consumer.WithObserver(obs))
	require.NoError(t, c.Start())
	waiting := deliverAsync(fp, "ORDER", orderMsg("o-1"))
	<-fp.suspended
	<-s.probed

	require.NoError(t, c.Shutdown(context.Background()), "returns without waiting for the store")

	r := <-waiting
	assert.ErrorIs(t, r.err, consumer.ErrStopped, "not answered before the client was shut down")
	assert.Zero(t, r.delay, "never dead-lettered")
	assert.Equal(t, []string{"subscribe ORDER", "start", "suspend", "suspend", "shutdown"}, fp.Calls())
	_, unpaused := obs.counts()
	assert.Equal(t, 1, unpaused, "the pause gauge is cleared")
	probes := s.probes.Load()
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, probes, s.probes.Load(), "the prober stopped with the consumer")
}

func TestGate_F19_WithoutProbeTheHandlerIsTheProbe(t *testing.T) {
	var runs atomic.Int32
	h := func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		if runs.Add(1) <= 3 {
			return consumer.Unavailable("connection refused"), errors.New("connection refused")
		}
		return consumer.Processed(), nil
	}
	c, fp := newConsumer(t, validConfig(), consumer.HandlerFunc(h))

	res, _ := fp.deliver(t, "ORDER", orderMsg("o-1"))

	assert.Equal(t, rmq.ConsumeSuccess, res)
	assert.Equal(t, int32(4), runs.Load(), "re-run after each backoff until the store answered")
	calls := fp.Calls()
	assert.Equal(t, 3, count(calls, "suspend"), "closed after each failed run: %v", calls)
	assert.Equal(t, 3, count(calls, "resume"), "reopened after each backoff: %v", calls)
	require.NoError(t, c.Shutdown(context.Background()))
}

// A handler cancelled by Shutdown is not a failure of the message, even on its last delivery.
func TestShutdown_CancelledHandlerIsNeverDeadLetteredNorPublished(t *testing.T) {
	sink := &fakeSink{}
	started := make(chan struct{})
	h := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		close(started)
		<-ctx.Done()
		// what Classify would make of a retry on the last delivery
		return consumer.DeadLetter("retries exhausted"), ctx.Err()
	}
	cfg := validConfig()
	cfg.DrainTimeout = 50 * time.Millisecond
	m := orderMsg("o-1")
	m.ReconsumeTimes = 16
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(h), consumer.WithDeadLetterSink(sink))
	result := deliverAsync(fp, "ORDER", m)
	<-started

	require.ErrorIs(t, c.Shutdown(context.Background()), context.DeadlineExceeded)

	r := <-result
	assert.ErrorIs(t, r.err, consumer.ErrStopped)
	assert.NotEqual(t, consumer.DelayLevelDLQ, r.delay)
	assert.Empty(t, sink.reasons, "no dead letter published")
}

func TestResolve_F19_UnavailableIsNeverAcknowledgedNorDeadLettered(t *testing.T) {
	o := consumer.Unavailable("connection refused")

	assert.Equal(t, "unavailable", o.Kind.String())
	assert.False(t, o.Kind.Acknowledges())
	assert.Equal(t, consumer.Resolution{Result: rmq.ConsumeRetryLater}, consumer.Resolve(o, errors.New("refused"), consumer.Concurrent))
	assert.Equal(t, rmq.SuspendCurrentQueueAMoment, consumer.Resolve(o, nil, consumer.Orderly).Result)
	assert.Equal(t, "unsubscribed", consumer.KindUnsubscribed.String())
	assert.True(t, consumer.KindUnsubscribed.Acknowledges())
}

// A handler that started before the gate closed and reports the store unavailable after it reopened saw
// the outage, not the recovery: it runs again at once, instead of closing the gate again or waiting
// OutageWait for an opening that already happened (which would spend the message's attempt).
func TestGate_F19_FailureFromBeforeTheRecoveryRunsAgainAtOnce(t *testing.T) {
	s := newStore()
	release := make(chan struct{})
	started := make(chan struct{})
	var slowRuns atomic.Int32
	h := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetKeys() != "slow" {
			return s.handle(ctx, d)
		}
		if slowRuns.Add(1) == 1 {
			close(started)
			<-release // the store went down and came back while this run was in flight
			return consumer.Unavailable("connection refused"), errors.New("dial tcp: connection refused")
		}
		return consumer.Processed(), nil
	}
	cfg := validConfig()
	cfg.HandlerTimeout, cfg.OutageWait = time.Second, 2*time.Second
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(h), consumer.WithHealthProbe(s))
	slow := deliverAsync(fp, "ORDER", orderMsg("slow"))
	<-started
	tripper := deliverAsync(fp, "ORDER", orderMsg("o-1"))
	<-fp.suspended
	<-s.probed
	s.down.Store(false)
	require.Equal(t, rmq.ConsumeSuccess, (<-tripper).res, "the gate reopened")

	close(release)
	r := <-slow

	assert.Equal(t, rmq.ConsumeSuccess, r.res, "run again after the recovery, not answered as a retry after OutageWait")
	assert.Equal(t, int32(2), slowRuns.Load())
	require.NoError(t, c.Shutdown(context.Background()))
	calls := fp.Calls()
	assert.Equal(t, 2, count(calls, "suspend"), "the stale failure does not close the gate again (one by the gate, one by Shutdown): %v", calls)
	assert.Equal(t, 1, count(calls, "resume"), "%v", calls)
}

// The pause and resume lines tell the operator which group paused, why, and whether a probe (rather than
// the handlers) decides when it resumes.
func TestGate_F19_PauseAndResumeLinesNameTheGroupReasonAndProbe(t *testing.T) {
	for _, withProbe := range []bool{true, false} {
		s := newStore()
		core, logs := observer.New(zapcore.InfoLevel)
		opts := []consumer.Option{consumer.WithLogger(zap.New(core))}
		h := s.handle
		if withProbe {
			opts = append(opts, consumer.WithHealthProbe(s))
		} else {
			var runs atomic.Int32
			h = func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
				if runs.Add(1) == 2 {
					s.down.Store(false) // the store is back by the re-run after the backoff
				}
				return s.handle(ctx, d)
			}
		}
		c, fp := newConsumer(t, validConfig(), consumer.HandlerFunc(h), opts...)
		result := deliverAsync(fp, "ORDER", orderMsg("o-1"))
		if withProbe {
			<-s.probed
			s.down.Store(false)
		}
		require.Equal(t, rmq.ConsumeSuccess, (<-result).res)
		require.NoError(t, c.Shutdown(context.Background()))

		paused := logs.FilterMessageSnippet("consumption paused").AllUntimed()
		require.Len(t, paused, 1, "probe=%v", withProbe)
		assert.Equal(t, map[string]any{"group": "cg", "reason": "connection refused", "probe": withProbe}, paused[0].ContextMap())
		resumed := logs.FilterMessageSnippet("consumption resumed").AllUntimed()
		require.Len(t, resumed, 1, "probe=%v", withProbe)
		fields := resumed[0].ContextMap()
		assert.Equal(t, withProbe, fields["probe"])
		assert.Equal(t, "cg", fields["group"])
		assert.Positive(t, fields["paused"], "the pause's duration")
	}
}

// chainStore is the condition a middleware.Chain around a probe-able dedup store carries to New: a
// concurrency check, and the store's Probe.
type chainStore struct{ *store }

func (chainStore) Error() string                { return "the chain's store" }
func (chainStore) CheckConcurrency(_ int) error { return nil }

// F19: the store of the handler's chain is the gate's probe without WithHealthProbe; WithHealthProbe(nil)
// turns the probe off (the handler is the probe).
func TestGate_F19_TheChainsStoreIsTheDefaultProbeAndWithHealthProbeNilTurnsItOff(t *testing.T) {
	for name, tc := range map[string]struct {
		opts   []consumer.Option
		probed bool
	}{
		"default":              {nil, true},
		"WithHealthProbe(nil)": {[]consumer.Option{consumer.WithHealthProbe(nil)}, false},
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore()
			c, fp := newConsumer(t, validConfig(), pending.Wrap(consumer.HandlerFunc(s.handle), chainStore{s}), tc.opts...)
			require.NoError(t, c.Start())

			r := deliverAsync(fp, "ORDER", orderMsg("o-a"))
			<-fp.suspended
			if tc.probed {
				<-s.probed
			} else {
				time.Sleep(300 * time.Millisecond) // past the first backoffs: the handler ran again instead
			}
			s.down.Store(false)
			res := <-r
			require.NoError(t, res.err)
			assert.Equal(t, rmq.ConsumeSuccess, res.res)
			require.NoError(t, c.Shutdown(context.Background()))
			assert.Equal(t, tc.probed, s.probes.Load() > 0, "probes: %d", s.probes.Load())
		})
	}
}
