package consumer

import (
	"context"
	"sync"
	"time"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// lagPoller reads the client's per-topic lag (GetOffsetDiffMap) every interval and reports it to the
// observer. Its goroutine is tied to a context: stop (called by Shutdown) or the consumer's run context
// ends it.
type lagPoller struct {
	group    string
	ns       string // the consumer's namespace: stripped from the client's topic names
	interval time.Duration
	push     rmq.PushConsumer
	observer Observer

	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	done   sync.WaitGroup
	// seen holds the topics reported so far; only the poller's goroutine touches it.
	seen map[string]bool
}

func newLagPoller(parent context.Context, cfg Config, push rmq.PushConsumer, obs Observer) *lagPoller {
	ctx, cancel := context.WithCancel(parent)
	return &lagPoller{group: cfg.Group, ns: cfg.Namespace, interval: cfg.LagInterval, push: push, observer: obs, ctx: ctx, cancel: cancel,
		seen: map[string]bool{}}
}

// start starts the poller's goroutine once; later calls do nothing.
func (p *lagPoller) start() {
	p.once.Do(func() {
		p.done.Add(1)
		go p.run()
	})
}

// stop ends the poller and waits for its goroutine. Safe to call twice, or without start.
func (p *lagPoller) stop() {
	p.cancel()
	p.done.Wait()
}

func (p *lagPoller) run() {
	defer p.done.Done()
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-tick.C:
			p.poll()
		}
	}
}

// poll reports the lag of every topic the client holds queues of (named without the namespace, like
// Delivery.Topic), and 0 for a topic reported before whose queues this process no longer holds (rebalanced
// to another consumer), so no gauge goes stale.
func (p *lagPoller) poll() {
	diff := map[string]int64{}
	for topic, n := range p.push.GetOffsetDiffMap() {
		diff[rmq.WithoutNamespace(p.ns, topic)] += n
	}
	for topic, n := range diff {
		p.observer.Lag(p.group, topic, n)
		p.seen[topic] = true
	}
	for topic := range p.seen {
		if _, ok := diff[topic]; !ok {
			p.observer.Lag(p.group, topic, 0)
			delete(p.seen, topic)
		}
	}
}
