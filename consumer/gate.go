package consumer

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// Backoff of the store health gate's prober, and the bound of one probe.
const (
	gateMinBackoff   = 100 * time.Millisecond
	gateMaxBackoff   = 5 * time.Second
	gateProbeTimeout = 5 * time.Second
)

// gate is the store health gate. It is open while the store is healthy. The first KindUnavailable
// outcome closes it: pulling is suspended, one warning is logged, the observer is told, and one prober
// goroutine probes the store with backoff; when the store answers and accepts writes the gate opens:
// pulling resumes, one line is logged with the pause's duration. Callbacks wait on the gate instead of
// running handlers against a store known to be down; waiting costs no CPU (a channel receive).
type gate struct {
	group    string
	push     rmq.PushConsumer
	probe    healthProbe // nil: reopen after the backoff; the handlers are the probe
	observer Observer
	log      *zap.Logger
	// ctx ends when the gate stops (Shutdown) or the run context ends; it bounds the prober.
	ctx    context.Context
	cancel context.CancelFunc
	// trips counts closings since a handler last got past the store, for the backoff without a probe.
	trips atomic.Int32

	mu      sync.Mutex
	closed  bool
	stopped bool
	opened  chan struct{} // closed when the gate opens again; valid while closed
	gen     uint64        // incremented each time the gate opens
	since   time.Time     // when the gate closed
	prober  sync.WaitGroup
}

// waitResult is how a wait on the gate ended.
type waitResult uint8

const (
	// gateOpen: run the handler (again).
	gateOpen waitResult = iota
	// gateTimedOut: the callback's OutageWait passed.
	gateTimedOut
	// gateStopped: the consumer is shutting down; do not answer.
	gateStopped
)

func newGate(parent context.Context, group string, push rmq.PushConsumer, probe healthProbe, obs Observer, log *zap.Logger) *gate {
	ctx, cancel := context.WithCancel(parent)
	return &gate{group: group, push: push, probe: probe, observer: obs, log: log, ctx: ctx, cancel: cancel}
}

// current returns the gate's generation, and the channel to wait on when it is closed (nil when open).
func (g *gate) current() (uint64, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return g.gen, g.opened
	}
	return g.gen, nil
}

// succeeded records that a handler got past the store, which resets the backoff without a probe.
func (g *gate) succeeded() {
	if g.trips.Load() != 0 {
		g.trips.Store(0)
	}
}

// trip closes the gate after a handler that started in generation gen reported the store unavailable,
// unless the gate has opened since (the failure predates the recovery: the caller runs again at once).
// It returns the channel to wait on (nil: run again now) and whether the gate is stopped.
func (g *gate) trip(gen uint64, reason string) (<-chan struct{}, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return nil, true
	}
	if gen != g.gen {
		return nil, false
	}
	if !g.closed {
		g.closed, g.opened, g.since = true, make(chan struct{}), time.Now()
		g.push.Suspend()
		backoff := g.backoff(g.trips.Add(1))
		g.log.Warn("store unavailable: consumption paused until it answers and accepts writes",
			zap.String("group", g.group), zap.String("reason", reason), zap.Bool("probe", g.probe != nil))
		g.observer.Paused(g.group, reason)
		g.prober.Add(1)
		go g.probeLoop(backoff)
	}
	return g.opened, false
}

// backoff is the first wait of the prober: gateMinBackoff with a probe; without one, doubled for every
// closing since a handler last got through, up to gateMaxBackoff.
func (g *gate) backoff(trips int32) time.Duration {
	d := gateMinBackoff
	for i := int32(1); g.probe == nil && i < trips && d < gateMaxBackoff; i++ {
		d *= 2
	}
	return min(d, gateMaxBackoff)
}

// wait blocks until ch (from current or trip) is closed, the deadline passes or the gate stops.
func (g *gate) wait(ch <-chan struct{}, deadline time.Time) waitResult {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-ch:
		return gateOpen
	case <-g.ctx.Done():
		return gateStopped
	case <-timer.C:
		return gateTimedOut
	}
}

// probeLoop is the prober: it probes with backoff until the store is healthy, then opens the gate. It ends
// with the gate's context, leaving the gate closed.
func (g *gate) probeLoop(backoff time.Duration) {
	defer g.prober.Done()
	timer := time.NewTimer(backoff)
	defer timer.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-timer.C:
		}
		if g.probe == nil || g.probeOnce() == nil {
			g.open()
			return
		}
		backoff = min(2*backoff, gateMaxBackoff)
		timer.Reset(backoff)
	}
}

func (g *gate) probeOnce() error {
	ctx, cancel := context.WithTimeout(g.ctx, gateProbeTimeout)
	defer cancel()
	err := g.probe.Probe(ctx)
	if err != nil {
		g.log.Debug("store probe failed; still paused", zap.String("group", g.group), zap.Error(err))
	}
	return err
}

// open resumes pulling and releases the waiting callbacks, unless the gate was stopped meanwhile (a
// suspended client being shut down must not be resumed).
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped || !g.closed {
		return
	}
	paused := time.Since(g.since)
	g.closed = false
	g.gen++
	close(g.opened)
	g.push.Resume()
	g.log.Info("store available again: consumption resumed", zap.String("group", g.group),
		zap.Duration("paused", paused), zap.Bool("probe", g.probe != nil))
	g.observer.Unpaused(g.group, paused)
}

// stop stops the gate for Shutdown: waiting callbacks return gateStopped, the prober ends without
// resuming, and the gate never trips again. It waits for the prober to return. Safe to call twice.
func (g *gate) stop() {
	g.mu.Lock()
	if !g.stopped {
		g.stopped = true
		if g.closed {
			paused := time.Since(g.since)
			g.log.Info("consumer stopping while paused for the store", zap.String("group", g.group), zap.Duration("paused", paused))
			g.observer.Unpaused(g.group, paused)
		}
	}
	g.mu.Unlock()
	g.cancel()
	g.prober.Wait()
}
