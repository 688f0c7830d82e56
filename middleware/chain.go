package middleware

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/pending"
)

// ErrChainOrder marks Chain's refusal of a wrong or incomplete order of rmqguard's standard middlewares (a
// middleware without the one it needs outside it, the same middleware twice, a dedup.Handle handler without Dedup);
// test it with errors.Is. The message names the middlewares, their positions (1 = outermost) and the fix.
var ErrChainOrder = errors.New("middleware chain in the wrong order")

// ErrNilDependency marks a middleware or handler built from a nil dependency (Dedup with a nil store,
// Metrics with nil metrics, a nil handler or middleware); test it with errors.Is.
var ErrNilDependency = errors.New("nil dependency")

// chainError is a refused order: msg is the message, Is matches ErrChainOrder.
type chainError struct{ msg string }

func (e *chainError) Error() string        { return e.msg }
func (e *chainError) Is(target error) bool { return target == ErrChainOrder }

func orderErr(format string, args ...any) error {
	return &chainError{msg: fmt.Sprintf(format, args...)}
}

// incompleteChainError is an order that lacks a middleware a chain around it may still provide (EventID
// or Classify for Dedup, Dedup for Version or a dedup.Handle handler). Chain returns the chain it built as
// wrapped (internal/pending) with this error; an outer Chain given that handler checks its own middlewares followed
// by kinds as one chain around a handler that is transactional if tx, and wraps h, not the pending handler.
type incompleteChainError struct {
	msg    string
	kinds  []kind               // the kind of each middleware of the built chain, outermost first (kindUser included)
	tx     bool                 // the innermost handler is a dedup.Handle handler
	h      consumer.Handler     // the built chain, without the pending layer
	stores []concurrencyChecker // the stores of its Dedup middlewares that check the consumer's concurrency
	probes []prober             // the stores of its Dedup middlewares that can be probed
}

func (e *incompleteChainError) Error() string        { return e.msg }
func (e *incompleteChainError) Is(target error) bool { return target == ErrChainOrder }

// missingErr is an *incompleteChainError whose chain Chain fills in.
func missingErr(format string, args ...any) error {
	return &incompleteChainError{msg: fmt.Sprintf(format, args...)}
}

// Chain wraps h in mws, the first outermost: Chain(h, a, b) runs a, then b, then h. A wrong order of
// rmqguard's middlewares is an error wrapping ErrChainOrder that names the fix; a nil h or a zero Middleware
// wraps ErrNilDependency. A chain that lacks only what an outer chain adds comes back pending, refused by
// consumer.New alone. See the package doc, "Chain rules".
func Chain(h consumer.Handler, mws ...Middleware) (consumer.Handler, error) {
	c := chainKinds{tx: dedup.IsTxHandler(h)}
	if err := pending.Refused(h); err != nil {
		// Only a pending handler made by Chain itself carries its chain; an incomplete chain's error wrapped in
		// another handler's refusal (a router refusing for a branch) is that handler's, not a chain to complete.
		inner, ok := err.(*incompleteChainError) // the error itself, not errors.As
		if !ok {
			return nil, err
		}
		h, c.inner, c.tx, c.stores, c.probes = inner.h, inner.kinds, inner.tx, inner.stores, inner.probes
	}
	if err := c.collect(h, mws); err != nil {
		return nil, err
	}
	err := c.check()
	var missing *incompleteChainError
	if err != nil && !errors.As(err, &missing) {
		return nil, err
	}
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i].wrap(h)
	}
	if missing != nil {
		missing.kinds, missing.tx, missing.h, missing.stores, missing.probes = c.kinds, c.tx, h, c.stores, c.probes
		return pending.Wrap(h, missing), nil
	}
	return withCondition(h, c.stores, c.probes), nil
}

// chainKinds is the chain Chain checks: the kind of each middleware, outermost first, and whether the
// innermost handler is a dedup.Handle handler.
type chainKinds struct {
	kinds []kind // mws' kinds, then inner
	inner []kind // the kinds of a pending inner chain's middlewares, outermost first
	outer int    // how many of kinds are the outer Chain's own (the rest are the inner chain's)
	tx    bool
	pos   map[kind]int // 1-based position of each standard middleware in kinds
	// stores are the Dedup stores that check the consumer's concurrency (the inner chain's first).
	stores []concurrencyChecker
	probes []prober // the Dedup stores that can be probed (the inner chain's first)
}

// collect fills c with the kinds of mws then c.inner, and returns why they can never run: a nil h or
// middleware, a standard middleware twice.
func (c *chainKinds) collect(h consumer.Handler, mws []Middleware) error {
	if h == nil {
		return fmt.Errorf("%w: middleware.Chain: the handler is nil", ErrNilDependency)
	}
	c.kinds = make([]kind, 0, len(mws)+len(c.inner))
	for i, mw := range mws {
		if mw.wrap == nil {
			return fmt.Errorf("%w: middleware.Chain: the middleware at position %d is nil (a zero Middleware, or Func(nil))", ErrNilDependency, i+1)
		}
		k := mw.kind
		if cc, ok := checkerOf(mw); ok {
			c.stores = append(c.stores, cc)
		}
		if p, ok := mw.store.(prober); ok {
			c.probes = append(c.probes, p)
		}
		c.kinds = append(c.kinds, k)
	}
	c.outer = len(c.kinds)
	c.kinds = append(c.kinds, c.inner...)
	c.pos = map[kind]int{}
	for i, k := range c.kinds {
		if k == kindUser {
			continue
		}
		if _, seen := c.pos[kindVersion]; seen && k == kindVersion {
			continue // one Version per aggregate type; the first one's position is the one checked
		}
		slot := k
		switch k {
		case kindTimeout:
			slot = kindDeadline // one deadline middleware per chain
		case kindLease:
			slot = kindDedup // Lease is Dedup in lease mode: one of them, under Dedup's rules
		}
		if p, ok := c.pos[slot]; ok {
			return orderErr("%s (%s) repeats %s (%s): keep one of them", k, c.at(i+1), c.kinds[p-1], c.at(p))
		}
		c.pos[slot] = i + 1
		if k == kindTimeout {
			c.pos[kindTimeout] = i + 1
		}
	}
	return nil
}

// check applies Chain's order rules to c's positions. A broken rule (a *chainError) wins over a missing
// middleware (an *incompleteChainError), which a chain around this one may still provide.
func (c *chainKinds) check() error {
	var missing error
	for _, err := range []error{c.needBefore(kindDedup, kindEventID), c.dedupNeedsClassify(), c.needBefore(kindVersion, kindDedup),
		c.timeoutInsideRecover(), c.timeoutOutsideLease(), c.txNeedsDedup()} {
		var m *incompleteChainError
		switch {
		case err == nil:
		case errors.As(err, &m):
			if missing == nil {
				missing = err
			}
		default:
			return err
		}
	}
	return missing
}

// dedupNeedsClassify: Dedup needs Classify before it, which a chain around it may add; a Classify inside
// Dedup cannot be mended from outside (a second Classify repeats it).
func (c *chainKinds) dedupNeedsClassify() error {
	d, ok := c.pos[kindDedup]
	q, classify := c.pos[kindClassify]
	if !ok || (classify && q < d) {
		return nil
	}
	if classify {
		return orderErr("%s (%s) needs middleware.Classify (%s) before it: move Classify before %s "+
			"(inside %s it never sees %s's own errors: a store outage at BEGIN, the claim or COMMIT is retried, spending "+
			"the message's attempts, instead of pausing consumption as consumer.Unavailable)", c.kinds[d-1], c.at(d), c.at(q),
			c.short(d), c.short(d), c.short(d))
	}
	return missingErr("%s (%s) needs middleware.Classify in the chain: add it before EventID "+
		"(without it a permanent error is retried on every delivery and then moved to the DLQ by the broker, without its reason)", c.kinds[d-1], c.at(d))
}

// timeoutInsideRecover: Timeout must not be outside Recover, which no chain around it can mend.
func (c *chainKinds) timeoutInsideRecover() error {
	t, ok := c.pos[kindTimeout]
	if r, recov := c.pos[kindRecover]; ok && recov && r > t {
		return orderErr("middleware.Timeout (%s) must be inside middleware.Recover (%s): move Recover before Timeout", c.at(t), c.at(r))
	}
	return nil
}

// timeoutOutsideLease: Timeout must not be inside Lease, which would end its lease when Timeout answers
// while the handler still runs.
func (c *chainKinds) timeoutOutsideLease() error {
	t, ok := c.pos[kindTimeout]
	if l, dedup := c.pos[kindDedup]; ok && dedup && c.kinds[l-1] == kindLease && t > l {
		return orderErr("middleware.Timeout (%s) must not be inside middleware.Lease (%s): Timeout answers at its deadline "+
			"while the handler may still run, and Lease would then end its lease, letting another delivery run the handler "+
			"at the same time: move Timeout before Lease, or use Deadline", c.at(t), c.at(l))
	}
	return nil
}

// txNeedsDedup: a dedup.Handle handler needs Dedup in the chain, which a chain around it may add.
func (c *chainKinds) txNeedsDedup() error {
	if _, ok := c.pos[kindDedup]; ok || !c.tx {
		return nil
	}
	return missingErr("the handler is a dedup.Handle transactional handler and needs the dedup transaction: add middleware.Dedup(store) to the chain, after EventID")
}

// needBefore is the error of a middleware of kind by without one of kind need before it: a missing need
// may still come from a chain around this one; a need present inside by cannot be mended from outside.
func (c *chainKinds) needBefore(by, need kind) error {
	p, ok := c.pos[by]
	if !ok {
		return nil
	}
	q, has := c.pos[need]
	if has && q < p {
		return nil
	}
	short := func(k kind) string { return strings.TrimPrefix(k.String(), "middleware.") }
	if has {
		return orderErr("%s (%s) needs %s before it: move %s before %s", c.kinds[p-1], c.at(p), c.kinds[q-1], c.short(q), c.short(p))
	}
	return missingErr("%s (%s) needs %s before it: add %s before %s", c.kinds[p-1], c.at(p), need, need, short(c.kinds[p-1]))
}

// short names the middleware at the 1-based position p without "middleware.", e.g. "Dedup" or "Lease".
func (c *chainKinds) short(p int) string {
	return strings.TrimPrefix(c.kinds[p-1].String(), "middleware.")
}

// at names the 1-based position p, marking a middleware of the pending inner chain.
func (c *chainKinds) at(p int) string {
	if len(c.inner) > 0 && p > c.outer {
		return fmt.Sprintf("position %d, in the inner chain", p)
	}
	return fmt.Sprintf("position %d", p)
}
