package middleware

import (
	"context"
	"sync/atomic"

	"github.com/rmqguard/rmqguard/consumer"
)

// A committed transaction is never reported as a failure: once the message's dedup row is committed (by
// its own transaction, or by an earlier one: a duplicate), the outcome is the chain's
// (consumer.Outcome.Committed, set by Dedup), whatever a deadline says afterwards; only a handler that ends
// late without a commit is a timeout. Deadline, inline, sees the flag on the outcome the chain returns.
// Timeout returns at the deadline without waiting, so it and Dedup settle who goes first through a
// commitGuard in the context: either Dedup reaches its decision first (a COMMIT about to be sent, a batch
// member kept, a duplicate found) and Timeout waits for its answer, or Timeout abandons the handler and
// Dedup commits nothing.

// commitGuard is the state of one message's run under Timeout: running, committing (Dedup has decided,
// see settle) or abandoned (Timeout returned at the deadline). Each transition happens once.
type commitGuard struct{ state atomic.Uint32 }

const (
	guardRunning uint32 = iota
	guardCommitting
	guardAbandoned
)

// commit reports whether Dedup's decision stands: the run was not abandoned, and now never will be.
func (g *commitGuard) commit() bool {
	return g.state.CompareAndSwap(guardRunning, guardCommitting) || g.state.Load() == guardCommitting
}

// abandon reports whether Timeout may return without the chain's answer: Dedup had not decided, and now
// never will.
func (g *commitGuard) abandon() bool {
	return g.state.CompareAndSwap(guardRunning, guardAbandoned) || g.state.Load() == guardAbandoned
}

// final reports whether the chain's result is a committed decision, which no deadline overrules: no error
// and an outcome that acknowledges the message, marked Committed (by Dedup). Committed on anything else
// (a retry or dead letter a handler marked) is not a commit, and a late one is a timeout.
func final(o consumer.Outcome, err error) bool {
	return err == nil && o.Committed && o.Kind.Acknowledges()
}

// guardKey is the context key of a run's *commitGuard.
type guardKey struct{}

// settle tells a Timeout around Dedup (if any) that the store has decided the message of ctx: Timeout then
// waits for Dedup's answer instead of abandoning the run at the deadline. It returns false when Timeout
// abandoned the run first: Dedup must then commit nothing. It costs a context lookup, no allocation.
func settle(ctx context.Context) bool {
	g, _ := ctx.Value(guardKey{}).(*commitGuard)
	return g == nil || g.commit()
}
