package middleware

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/pending"
)

// concurrencyChecker is a dedup store's protocol, which must know how many handlers run at once: a
// *dedup.Store's transactions may share a bounded pool with the handlers, and layers forward the check to it.
type concurrencyChecker interface {
	CheckConcurrency(handlers int) error
}

// storeCondition is the condition a chain around such stores carries to consumer.New and Start as a
// internal/pending condition (see there): they call CheckConcurrency with the most handlers they run at once.
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

// CheckConfig returns the first error of a store's check of the consumer's Config (a Lease's), if any.
func (c *storeCondition) CheckConfig(cfg consumer.Config) error {
	for _, s := range c.stores {
		if cc, ok := s.(interface{ CheckConfig(consumer.Config) error }); ok {
			if err := cc.CheckConfig(cfg); err != nil {
				return err
			}
		}
	}
	return nil
}

// leaseCondition is a Lease middleware's store and lease: the store's concurrency check, and the
// consumer's Config checked against the lease (see CheckConfig).
type leaseCondition struct {
	store concurrencyChecker
	lease time.Duration
}

func (c leaseCondition) CheckConcurrency(handlers int) error {
	return c.store.CheckConcurrency(handlers)
}

// CheckConfig refuses a consumer that runs batches (BatchSize > 1: Lease dead-letters every member) or
// whose HandlerTimeout is not shorter than the lease (a handler still running could lose its lease to
// another delivery, which would then make the external call too).
func (c leaseCondition) CheckConfig(cfg consumer.Config) error {
	if cfg.BatchSize > 1 {
		return fmt.Errorf("middleware.Lease does not run in batches, and consumer.Config.BatchSize is %d: set BatchSize to 1", cfg.BatchSize)
	}
	if c.lease <= cfg.HandlerTimeout {
		return fmt.Errorf("middleware.Lease: the lease %s is not longer than consumer.Config.HandlerTimeout %s, so a handler "+
			"still running can lose its lease to another delivery of the event: make the lease longer than HandlerTimeout "+
			"(e.g. 2 × HandlerTimeout) or HandlerTimeout shorter", c.lease, cfg.HandlerTimeout)
	}
	return nil
}

// withCondition returns h wrapped (internal/pending) with the stores' condition, or h itself without one.
// With probes, the condition is also the consumer's default health probe (consumer.WithHealthProbe).
func withCondition(h consumer.Handler, stores []concurrencyChecker, probes []prober) consumer.Handler {
	if len(stores) == 0 {
		return h
	}
	if len(probes) > 0 {
		return pending.Wrap(h, &probingCondition{storeCondition{stores: stores}, probes})
	}
	return pending.Wrap(h, &storeCondition{stores: stores})
}

// prober is a store the consumer's health gate can probe (*dedup.Store, consumer.WithHealthProbe).
type prober interface {
	Probe(ctx context.Context) error
}

// probingCondition is a storeCondition whose stores can be probed: consumer.New takes it as the probe of its
// store health gate unless WithHealthProbe names one.
type probingCondition struct {
	storeCondition
	probes []prober
}

// Probe returns the first store's probe error, if any.
func (c *probingCondition) Probe(ctx context.Context) error {
	for _, p := range c.probes {
		if err := p.Probe(ctx); err != nil {
			return err
		}
	}
	return nil
}

// errNilNext is the refusal of Dedup or Lease composed by hand around a nil handler.
var errNilNext = errors.New("middleware.Dedup: the handler it wraps is nil")

// checkerOf returns the concurrency checker of a Dedup or Lease middleware's store, if it has one.
func checkerOf(mw Middleware) (concurrencyChecker, bool) {
	if mw.store == nil {
		return nil, false
	}
	cc := mw.store.Protocol()
	if mw.kind == kindLease {
		return leaseCondition{store: cc, lease: mw.lease}, true
	}
	return cc, true
}
