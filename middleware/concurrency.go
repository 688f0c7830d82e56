package middleware

import (
	"errors"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
)

// concurrencyChecker is a dedup store that must know how many handlers run at once: *dedup.Store, whose
// transactions may share a bounded pool with the handlers (dedup.Store.CheckConcurrency), and layers that
// forward the check to it.
type concurrencyChecker interface {
	CheckConcurrency(handlers int) error
}

// storeCondition is the condition a chain around such stores carries to consumer.New and Start as a
// consumer.Pending error (see there): they call CheckConcurrency with the most handlers they run at once.
type storeCondition struct{ stores []concurrencyChecker }

func (c *storeCondition) Error() string {
	return "middleware.Dedup: its store's connection pool is checked against the consumer's concurrency (consumer.New and Start do)"
}

// CheckConcurrency returns the first store's error, if any.
func (c *storeCondition) CheckConcurrency(handlers int) error {
	for _, s := range c.stores {
		if err := s.CheckConcurrency(handlers); err != nil {
			return err
		}
	}
	return nil
}

// withCondition returns h as a consumer.Pending carrying the stores' condition, or h itself without one.
func withCondition(h consumer.Handler, stores []concurrencyChecker) consumer.Handler {
	if len(stores) == 0 {
		return h
	}
	return consumer.Pending(h, &storeCondition{stores: stores})
}

// dedupStore is what a Dedup middleware given no next handler answers with (see dedupMW.wrap): Chain learns
// the store from it, and a chain composed by hand around a nil handler is refused.
type dedupStore struct{ store dedup.TxStore }

func (e *dedupStore) Error() string { return "middleware.Dedup: the handler it wraps is nil" }

// checkerOf returns the concurrency checker of a Dedup middleware's store, if it has one.
func checkerOf(mw consumer.Middleware) (concurrencyChecker, bool) {
	var ds *dedupStore
	if !errors.As(consumer.Refused(mw(nil)), &ds) {
		return nil, false
	}
	cc, ok := ds.store.(concurrencyChecker)
	return cc, ok
}
