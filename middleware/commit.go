package middleware

import (
	"context"
	"sync/atomic"
)

// A committed transaction is never reported as a failure: once the transaction holding the dedup row has
// committed, the outcome is the chain's (consumer.Outcome.Committed, set by Dedup), whatever a deadline says
// afterwards; only a handler that ends late without a commit is a timeout. Deadline, inline, sees the flag
// on the outcome the chain returns. Timeout returns at the deadline without waiting, so it and Dedup settle
// who goes first through a commitGuard in the context: either Dedup reaches its commit point (the COMMIT of
// a message alone, the keeping of a batch member) and Timeout waits for that answer, or Timeout abandons the
// handler and Dedup commits nothing.

// commitGuard is the state of one message's run under Timeout: running, committing (Dedup passed its
// commit point) or abandoned (Timeout returned at the deadline). Each transition happens once.
type commitGuard struct{ state atomic.Uint32 }

const (
	guardRunning uint32 = iota
	guardCommitting
	guardAbandoned
)

// commit reports whether Dedup may commit: the run was not abandoned, and now never will be.
func (g *commitGuard) commit() bool {
	return g.state.CompareAndSwap(guardRunning, guardCommitting) || g.state.Load() == guardCommitting
}

// abandon reports whether Timeout may return without the chain's answer: Dedup had not reached its commit
// point, and now never will.
func (g *commitGuard) abandon() bool {
	return g.state.CompareAndSwap(guardRunning, guardAbandoned) || g.state.Load() == guardAbandoned
}

// guardKey is the context key of a run's *commitGuard.
type guardKey struct{}

// mayCommit reports whether Dedup may commit the transaction of ctx's message: true unless a Timeout around
// it abandoned the handler at its deadline (then nothing must commit). It costs a context lookup, no
// allocation.
func mayCommit(ctx context.Context) bool {
	g, _ := ctx.Value(guardKey{}).(*commitGuard)
	return g == nil || g.commit()
}
