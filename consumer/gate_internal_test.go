package consumer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// The prober's first wait, as WithHealthProbe documents it: with a probe always gateMinBackoff; without
// one, doubled for every closing since a handler last got through, up to gateMaxBackoff.
func TestGate_F19_BackoffDoublesPerClosingWithoutAProbe(t *testing.T) {
	g := newGate(context.Background(), "cg", nil, nil, nopObserver{}, zap.NewNop())
	defer g.cancel()
	for trips, want := range map[int32]time.Duration{
		1:  100 * time.Millisecond,
		2:  200 * time.Millisecond,
		3:  400 * time.Millisecond,
		6:  3200 * time.Millisecond,
		7:  gateMaxBackoff, // 6.4 s capped
		50: gateMaxBackoff,
	} {
		assert.Equal(t, want, g.backoff(trips), "closing %d without a probe", trips)
	}

	probed := newGate(context.Background(), "cg", nil, probeFunc(func(context.Context) error { return nil }), nopObserver{}, zap.NewNop())
	defer probed.cancel()
	for _, trips := range []int32{1, 2, 5, 50} {
		assert.Equal(t, gateMinBackoff, probed.backoff(trips), "with a probe the prober backs off itself (closing %d)", trips)
	}
}

// Without a probe the handlers are the probe: once one gets past the store, the next outage starts again
// at the shortest wait instead of the long one the previous outage had reached.
func TestGate_F19_AHandlerThatGotThroughResetsTheBackoff(t *testing.T) {
	g := newGate(context.Background(), "cg", nil, nil, nopObserver{}, zap.NewNop())
	defer g.cancel()
	g.trips.Store(5) // five closings in a row: the next would wait 3.2 s

	g.succeeded()

	assert.Equal(t, gateMinBackoff, g.backoff(g.trips.Add(1)), "the next closing waits the minimum again")
}

// With a probe the prober doubles its wait after every failed probe (100 ms, 200 ms, 400 ms, …), instead of
// hammering a store that is down. Only lower bounds on the gaps are asserted: a timer never fires early.
func TestGate_F19_ProberDoublesItsWaitAfterEachFailedProbe(t *testing.T) {
	probes := make(chan time.Time, 16)
	failing := probeFunc(func(context.Context) error {
		probes <- time.Now()
		return errors.New("dial tcp: connection refused")
	})
	g := newGate(context.Background(), "cg", suspendOnly{}, failing, nopObserver{}, zap.NewNop())
	_, stopped := g.trip(0, "connection refused")
	require.False(t, stopped)

	first, second, third := <-probes, <-probes, <-probes
	g.stop()

	assert.GreaterOrEqual(t, second.Sub(first), 2*gateMinBackoff)
	assert.GreaterOrEqual(t, third.Sub(second), 4*gateMinBackoff)
}

// suspendOnly is a rmq.PushConsumer for the gate alone: it only needs Suspend and Resume.
type suspendOnly struct{ rmq.PushConsumer }

func (suspendOnly) Suspend() {}
func (suspendOnly) Resume()  {}

type probeFunc func(context.Context) error

func (f probeFunc) Probe(ctx context.Context) error { return f(ctx) }
