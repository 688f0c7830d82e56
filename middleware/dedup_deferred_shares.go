package middleware

import (
	"context"
	"sync"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/batch"
)

// A batch's first pass (dedup_deferred.go) with members that go to several stores.

// firstPassShares are the shares of a first pass, one per store, attached to the batch.Batch under
// firstPassKey (its Finish does nothing). The shares of several stores (a router with a Dedup per branch)
// commit one after another, not as one: a share that commits before another asks for a careful pass
// would have its members handled again there (reported as duplicates) and, in orderly mode, take effect
// before a failed member ahead of them. So a batch with more than one store is handled carefully.
type firstPassShares struct {
	mu     sync.Mutex
	shares []*deferredBatch
}

type firstPassKey struct{}

// firstPassSharesOf returns the batch's firstPassShares, attaching it on first use.
func firstPassSharesOf(b *batch.Batch[consumer.Outcome, string]) (*firstPassShares, error) {
	if r, ok := b.Resource(firstPassKey{}).(*firstPassShares); ok {
		return r, nil
	}
	r := &firstPassShares{}
	if err := b.Attach(firstPassKey{}, r); err != nil {
		return nil, err
	}
	return r, nil
}

// add records db; from the second store on, every share is handled carefully.
func (s *firstPassShares) add(db *deferredBatch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shares = append(s.shares, db)
	if len(s.shares) < 2 {
		return
	}
	for _, share := range s.shares {
		share.mu.Lock()
		if share.careful == "" {
			share.careful = "the batch's members go to several Dedup stores, which cannot commit as one"
		}
		share.mu.Unlock()
	}
}

// Finish implements batch.Resource: nothing to finish.
func (*firstPassShares) Finish(context.Context) error { return nil }
