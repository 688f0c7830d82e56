package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
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

type probeFunc func(context.Context) error

func (f probeFunc) Probe(ctx context.Context) error { return f(ctx) }
