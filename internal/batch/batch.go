package batch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"
)

// ErrStoreUnavailable marks a Resource.Finish error whose cause is the store, not a member: the shared
// transaction was lost to a broken connection, or its COMMIT failed for the store's sake. A message
// alone would be unavailable then; so the consumer waits at the store gate and handles the whole
// callback again, spending no attempt ("an attempt is spent only by the message's own failure"), for at
// most Config.OutageWait; past it the members are retried (spending an attempt), as a message alone is.
var ErrStoreUnavailable = errors.New("rmqguard consumer: a batch's shared resource was lost to the store")

// ErrHandleCarefully marks a Resource.Finish error of a first pass (Careful false) whose resource
// deferred its members' work to Finish and found a member it cannot keep (an error, a retry, a panic…):
// the resource undid everything, and the consumer handles the whole callback again at once in a careful
// pass, which decides each member on its own; no attempt is spent, and that pass's outcomes are the ones
// reported.
var ErrHandleCarefully = errors.New("rmqguard consumer: a member of the batch's first pass was not kept; the batch is handled again carefully")

// Resource is something the members of one client callback share, such as the one dedup transaction of
// a batch (middleware.Dedup): the consumer finishes it once, after the last member was handled and
// before any dead letter is published or any decision reported.
type Resource interface {
	// Finish ends the resource (for a transaction: COMMIT, or ROLLBACK when no member kept anything) with
	// the batch's context (Batch.Context). An error turns every member that depended on it (Batch.Depend)
	// into a retry carrying the error, unless the callback is handled again (ErrStoreUnavailable,
	// ErrHandleCarefully, a first loss).
	Finish(ctx context.Context) error
}

// Batch is the scope of one pass over a client callback of several messages, with the consumer's
// outcome type O and cause type C (see the package doc).
type Batch[O any, C comparable] struct {
	ctx     context.Context
	careful bool // Careful
	ordered bool // Ordered
	mu      sync.Mutex
	member  int // index of the member being handled
	order   []any
	res     map[any]*entry
	causes  map[int]C // SetDuplicateCause
	decided map[int]O // SetOutcome
}

// entry is one attached resource and the members that depend on it.
type entry struct {
	r    Resource
	deps map[int]bool
}

type key struct{}

// FromContext returns the Batch of the callback ctx's member belongs to, or nil when the consumer
// handles the message alone (Config.BatchSize 1, or a callback of one message) or ctx is not a handler's.
func FromContext[O any, C comparable](ctx context.Context) *Batch[O, C] {
	b, _ := ctx.Value(key{}).(*Batch[O, C])
	return b
}

// With returns ctx carrying b (nil: ctx unchanged).
func With[O any, C comparable](ctx context.Context, b *Batch[O, C]) context.Context {
	if b == nil {
		return ctx
	}
	return context.WithValue(ctx, key{}, b)
}

// New returns the scope of one pass over a callback of n members, with its context from parent bounded
// by perMember × n; cancel ends that context (and with it whatever resource was not finished).
func New[O any, C comparable](parent context.Context, perMember time.Duration, n int, careful, ordered bool) (*Batch[O, C], context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, perMember*time.Duration(n))
	return &Batch[O, C]{ctx: ctx, careful: careful, ordered: ordered, res: map[any]*entry{}}, cancel
}

// Context returns the batch's own context: begin shared resources with it, not with a member's context
// (which ends when that member's handler returns).
func (b *Batch[O, C]) Context() context.Context { return b.ctx }

// Careful reports whether this pass must decide each member while it is handled; false in the first,
// optimistic pass, whose resources may defer their members' work to Finish.
func (b *Batch[O, C]) Careful() bool { return b.careful }

// Ordered reports whether the members must take effect in message order (Config.Orderly): a resource
// that defers their work must not reorder it.
func (b *Batch[O, C]) Ordered() bool { return b.ordered }

// Enter records that member i is being handled now; the consumer calls it before each member.
func (b *Batch[O, C]) Enter(i int) {
	b.mu.Lock()
	b.member = i
	b.mu.Unlock()
}

// Resource returns the resource attached under key, or nil.
func (b *Batch[O, C]) Resource(key any) Resource {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.res[key]; ok {
		return e.r
	}
	return nil
}

// Attach attaches r under key; the consumer finishes it after the last member (resources in the order
// they were attached). It returns an error when key already has a resource.
func (b *Batch[O, C]) Attach(key any, r Resource) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.res[key]; ok {
		return fmt.Errorf("consumer: Batch.Attach: key %v already has a resource", key)
	}
	b.res[key] = &entry{r: r, deps: map[int]bool{}}
	b.order = append(b.order, key)
	return nil
}

// Member returns the index, in its callback, of the member being handled now. A middleware that may
// outlive its member (abandoned at its deadline) takes it on entry and passes it to Depend.
func (b *Batch[O, C]) Member() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.member
}

// Depend records that member (see Member) depends on the resource under key: its acknowledgement holds
// only if that resource finishes without error. Nothing happens when key has no resource.
func (b *Batch[O, C]) Depend(key any, member int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.res[key]; ok {
		e.deps[member] = true
	}
}

// SetDuplicateCause records c as the cause of member's duplicate outcome (member: see Member), for a
// resource that determines the causes of the batch's duplicates together (one read for the batch) when it
// finishes. The consumer applies it, after every resource finished, to a member whose outcome is a
// duplicate without a cause; otherwise, and for a c other than redelivery, resend and replay, it is
// ignored.
func (b *Batch[O, C]) SetDuplicateCause(member int, c C) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.causes == nil {
		b.causes = map[int]C{}
	}
	b.causes[member] = c
}

// SetOutcome records o as member's outcome (member: see Member), decided by a resource in its Finish
// (work deferred there). Once every resource finished, the consumer puts it in place of the member's chain
// outcome, unless a resource the member depended on failed. A first pass's resource that fails because a
// member panicked sets that member's outcome with the panic cause: the consumer logs the panic at warn
// (the careful pass that follows may not meet it again).
func (b *Batch[O, C]) SetOutcome(member int, o O) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.decided == nil {
		b.decided = map[int]O{}
	}
	b.decided[member] = o
}

// Outcomes returns a copy of the outcomes resources set (SetOutcome), by member.
func (b *Batch[O, C]) Outcomes() map[int]O {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.decided)
}

// Causes returns a copy of the duplicate causes resources set (SetDuplicateCause), by member.
func (b *Batch[O, C]) Causes() map[int]C {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.causes)
}

// Finish finishes every attached resource once, with the batch context, in the order they were attached
// (a resource attached while another finished is finished too), and calls failed for each member that
// depended on one that failed, with its error. It returns the first failure (lost) and the first failure
// that wraps ErrStoreUnavailable (outage); both nil when every resource finished.
func (b *Batch[O, C]) Finish(failed func(member int, err error)) (lost, outage error) {
	for n := 0; ; n++ {
		b.mu.Lock()
		if n == len(b.order) {
			b.mu.Unlock()
			return lost, outage
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
			failed(i, err)
		}
	}
}
