package consumer

// The path of a message, stage 5 of 9: a batch member's Batch, which its handler's middlewares share
// with the other members, is finished after the pass's last member (finish). Next: orderly.go.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"
)

// ErrStoreUnavailable marks a BatchResource.Finish error whose cause is the store, not a member: the
// shared transaction was lost to a broken connection, or its COMMIT failed for the store's sake. A message
// alone would be KindUnavailable then; so the consumer waits at the store gate and handles the whole
// callback again, spending no attempt ("an attempt is spent only by the message's own failure"), for at
// most Config.OutageWait; past it the members are retried (spending an attempt), as a message alone is.
var ErrStoreUnavailable = errors.New("rmqguard consumer: a batch's shared resource was lost to the store")

// ErrHandleCarefully marks a BatchResource.Finish error of a first pass (Batch.Careful false) whose
// resource deferred its members' work to Finish and found a member it cannot keep (an error, a retry, a
// panic…): the resource undid everything, and the consumer handles the whole callback again at once in a
// careful pass, which decides each member on its own; no attempt is spent, and that pass's outcomes are
// the ones reported.
var ErrHandleCarefully = errors.New("rmqguard consumer: a member of the batch's first pass was not kept; the batch is handled again carefully")

// BatchResource is something the members of one client callback share, such as the one dedup transaction
// of a batch (middleware.Dedup): the consumer finishes it once, after the last member was handled and
// before any dead letter is published or any decision reported.
type BatchResource interface {
	// Finish ends the resource (for a transaction: COMMIT, or ROLLBACK when no member kept anything) with
	// the batch's context (Batch.Context). An error turns every member that depended on it (Batch.Depend)
	// into a retry carrying the error, unless the callback is handled again (ErrStoreUnavailable,
	// ErrHandleCarefully, a first loss).
	Finish(ctx context.Context) error
}

// Batch is the scope of one client callback of several messages (Config.BatchSize > 1), in each member's
// context (BatchFromContext): a middleware attaches resources the members share, finished after the last
// member. A callback is handled in passes, each with a new Batch: an optimistic first pass, then careful
// ones. See the package doc, "Batch".
type Batch struct {
	ctx     context.Context
	careful bool // Careful
	ordered bool // Ordered
	mu      sync.Mutex
	member  int // index of the member being handled
	order   []any
	res     map[any]*batchEntry
	causes  map[int]Cause   // SetDuplicateCause
	decided map[int]Outcome // SetOutcome
}

// batchEntry is one attached resource and the members that depend on it.
type batchEntry struct {
	r    BatchResource
	deps map[int]bool
}

type batchKey struct{}

// BatchFromContext returns the Batch of the callback ctx's member belongs to, or nil when the consumer
// handles the message alone (Config.BatchSize 1, or a callback of one message) or ctx is not a handler's.
func BatchFromContext(ctx context.Context) *Batch {
	b, _ := ctx.Value(batchKey{}).(*Batch)
	return b
}

// withBatch returns ctx carrying b (nil: ctx unchanged).
func withBatch(ctx context.Context, b *Batch) context.Context {
	if b == nil {
		return ctx
	}
	return context.WithValue(ctx, batchKey{}, b)
}

// newBatch returns the scope of one pass over a callback of n members, with its context from parent
// bounded by perMember × n; cancel ends that context (and with it whatever resource was not finished).
func newBatch(parent context.Context, perMember time.Duration, n int, careful, ordered bool) (*Batch, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, perMember*time.Duration(n))
	return &Batch{ctx: ctx, careful: careful, ordered: ordered, res: map[any]*batchEntry{}}, cancel
}

// Context returns the batch's own context: begin shared resources with it, not with a member's context
// (which ends when that member's handler returns).
func (b *Batch) Context() context.Context { return b.ctx }

// Careful reports whether this pass must decide each member while it is handled; false in the first,
// optimistic pass, whose resources may defer their members' work to Finish (see Batch).
func (b *Batch) Careful() bool { return b.careful }

// Ordered reports whether the members must take effect in message order (Config.Orderly): a resource
// that defers their work must not reorder it.
func (b *Batch) Ordered() bool { return b.ordered }

// enter records that member i is being handled now.
func (b *Batch) enter(i int) {
	b.mu.Lock()
	b.member = i
	b.mu.Unlock()
}

// Resource returns the resource attached under key, or nil.
func (b *Batch) Resource(key any) BatchResource {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.res[key]; ok {
		return e.r
	}
	return nil
}

// Attach attaches r under key; the consumer finishes it after the last member (resources in the order
// they were attached). It returns an error when key already has a resource.
func (b *Batch) Attach(key any, r BatchResource) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.res[key]; ok {
		return fmt.Errorf("consumer: Batch.Attach: key %v already has a resource", key)
	}
	b.res[key] = &batchEntry{r: r, deps: map[int]bool{}}
	b.order = append(b.order, key)
	return nil
}

// Member returns the index, in its callback, of the member being handled now. A middleware that may
// outlive its member (abandoned at its deadline) takes it on entry and passes it to Depend.
func (b *Batch) Member() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.member
}

// Depend records that member (see Member) depends on the resource under key: its acknowledgement holds
// only if that resource finishes without error. Nothing happens when key has no resource.
func (b *Batch) Depend(key any, member int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.res[key]; ok {
		e.deps[member] = true
	}
}

// SetDuplicateCause records c as the cause of member's duplicate outcome (member: see Member), for a
// resource that determines the causes of the batch's duplicates together (one read for the batch) when it
// finishes. The consumer applies it, after every resource finished, to a member whose outcome is a
// duplicate without a cause; otherwise, and for a c other than CauseRedelivery, CauseResend and
// CauseReplay, it is ignored.
func (b *Batch) SetDuplicateCause(member int, c Cause) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.causes == nil {
		b.causes = map[int]Cause{}
	}
	b.causes[member] = c
}

// SetOutcome records o as member's outcome (member: see Member), decided by a resource in its Finish
// (work deferred there). Once every resource finished, the consumer puts it in place of the member's chain
// outcome, unless a resource the member depended on failed. A first pass's resource that fails because a
// member panicked sets that member's outcome with Cause CausePanic: the consumer logs the panic at warn
// (the careful pass that follows may not meet it again).
func (b *Batch) SetOutcome(member int, o Outcome) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.decided == nil {
		b.decided = map[int]Outcome{}
	}
	b.decided[member] = o
}

// panicked returns the first member whose outcome a resource set with Cause CausePanic (SetOutcome).
func (b *Batch) panicked() (member int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	member = -1
	for i, o := range b.decided {
		if o.Cause == CausePanic && (member < 0 || i < member) {
			member = i
		}
	}
	return member, member >= 0
}

// finish finishes every attached resource once, with the batch context, and turns each member of ms
// that depended on one that failed into a retry carrying the error (its outcome is decided here, once,
// before dead letters, reports and metrics see it); the others get the outcomes resources set
// (SetOutcome), then the duplicates the causes resources set (SetDuplicateCause). An outcome a resource
// set is the chain's too: the member's handler ran in Finish. It returns the first failure (lost) and
// the first failure that wraps ErrStoreUnavailable (outage); both nil when every resource finished.
func (b *Batch) finish(ms []message) (lost, outage error) {
	failed := map[int]bool{}
	for n := 0; ; n++ { // a resource attached while another finished is finished too
		b.mu.Lock()
		if n == len(b.order) {
			b.mu.Unlock()
			break
		}
		e := b.res[b.order[n]]
		b.mu.Unlock()
		err := e.r.Finish(b.ctx)
		if err == nil {
			continue
		}
		if lost == nil {
			lost = err
		}
		if outage == nil && errors.Is(err, ErrStoreUnavailable) {
			outage = err
		}
		b.mu.Lock()
		deps := maps.Clone(e.deps)
		b.mu.Unlock()
		for i := range deps {
			failed[i] = true
			ms[i].outcome = Retry(0, "the batch's shared transaction did not commit: "+err.Error())
			ms[i].err = fmt.Errorf("consumer: batch resource: %w", err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, o := range b.decided {
		if i < len(ms) && !failed[i] {
			ms[i].outcome = o
		}
	}
	for i, c := range b.causes {
		if i < len(ms) && ms[i].outcome.Kind == KindDuplicate && ms[i].outcome.Cause == "" && knownDuplicateCause(c) {
			ms[i].outcome.Cause = c
		}
	}
	for i := range b.decided {
		if i < len(ms) && !failed[i] {
			ms[i].chain = ms[i].outcome
		}
	}
	return lost, outage
}
