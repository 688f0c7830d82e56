// Package collect lets a batch handler (dedup.HandleBatch) run once for the new members of a batch's first
// pass (middleware.Dedup): while middleware.Dedup runs the members' chains in its Finish, the context
// carries a Collector, to which the batch handler adds each delivery instead of handling it; then
// middleware.Dedup flushes it, calling each batch handler once with its deliveries.
package collect

import (
	"context"
	"fmt"
	"sync"

	"github.com/rmqguard/rmqguard/consumer"
)

// Run handles deliveries ds together: one outcome per delivery, in order, or an error for all of them.
type Run func(ctx context.Context, ds []*consumer.Delivery) ([]consumer.Outcome, error)

// Collector holds the deliveries batch handlers collected, by handler. The zero value is ready to use.
type Collector struct {
	mu     sync.Mutex
	order  []any
	groups map[any]*group
}

// group is one batch handler's run and its deliveries, in the order collected.
type group struct {
	run Run
	ds  []*consumer.Delivery
}

type ctxKey struct{}

// With returns ctx carrying c.
func With(ctx context.Context, c *Collector) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// From returns the Collector of ctx, nil when none.
func From(ctx context.Context) *Collector {
	c, _ := ctx.Value(ctxKey{}).(*Collector)
	return c
}

// Add adds d to the deliveries of the batch handler key (comparable), whose run is run.
func (c *Collector) Add(key any, run Run, d *consumer.Delivery) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil {
		c.groups = map[any]*group{}
	}
	g, ok := c.groups[key]
	if !ok {
		g = &group{run: run}
		c.groups[key] = g
		c.order = append(c.order, key)
	}
	g.ds = append(g.ds, d)
}

// Len returns the number of deliveries collected.
func (c *Collector) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, g := range c.groups {
		n += len(g.ds)
	}
	return n
}

// Flush calls each batch handler's run once with its deliveries, in the order the handlers first
// collected, and result for each delivery: its outcome, or the run's error (also when it returned another
// number of outcomes than deliveries). It empties c. A panic in a run goes on to the caller.
func (c *Collector) Flush(ctx context.Context, result func(d *consumer.Delivery, o consumer.Outcome, err error)) {
	c.mu.Lock()
	order, groups := c.order, c.groups
	c.order, c.groups = nil, nil
	c.mu.Unlock()
	for _, key := range order {
		g := groups[key]
		outs, err := g.run(ctx, g.ds)
		if err == nil && len(outs) != len(g.ds) {
			err = fmt.Errorf("a batch handler returned %d outcomes for %d deliveries", len(outs), len(g.ds))
		}
		for i, d := range g.ds {
			if err != nil {
				result(d, consumer.Outcome{}, err)
				continue
			}
			result(d, outs[i], nil)
		}
	}
}
