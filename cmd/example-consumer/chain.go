package main

import (
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
)

// chain is the example's middleware chain around the handlers of s, outermost first: metrics, logging,
// panic recovery, classification, event identity (EVENT_ID, else the JSON field eventId; EVENT_TYPE, else
// the tag; AGGREGATE_ID), the check that an order event's body names the order of its AGGREGATE_ID
// (shop.CheckOrderAggregate: otherwise the version of one order would decide for another), the handler
// deadline, the dedup transaction, and inside it the version check of the order events (AGGREGATE_VERSION required; the stored version is the order row's own version column,
// read by Shop.LoadOrderVersion). A version gap is retried o.gapRetries times at o.gapDelayLevel, then
// dead-lettered with its reason (--gap-retries 0: at once; the library would read 0 as its default, 3).
// Dedup runs on fast (the store in the Redis fast path, see fastPath), or on store when fast is nil.
func chain(s *shop.Shop, store *dedup.Store, fast dedup.TxStore, m *metrics.Metrics, log *zap.Logger, o runOptions) (consumer.Handler, error) {
	observed, eventID, deduped, err := exampleMiddlewares(store, fast, m)
	if err != nil {
		return nil, err
	}
	gapRetries := o.gapRetries
	if gapRetries == 0 {
		gapRetries = middleware.NoGapRetries
	}
	version, err := middleware.Version(store, middleware.VersionConfig{
		AggregateType: "order",
		EventTypes:    shop.OrderEventTypes(),
		Load:          s.LoadOrderVersion,
		Require:       true,
		GapRetries:    gapRetries,
		GapDelayLevel: o.gapDelayLevel,
		OnGap:         middleware.GapDeadLetter,
	})
	if err != nil {
		return nil, err
	}
	return middleware.Chain(dedup.Handle(s.Handle),
		observed, middleware.Recover(log), middleware.Classify(),
		eventID, shop.CheckOrderAggregate(), middleware.Deadline(0), deduped, version)
}

// loyaltyBatchSize is the loyalty group's consumer.Config.BatchSize: its handler credits a batch's accounts in
// one statement.
const loyaltyBatchSize = 16

// loyaltyChain is the loyalty group's chain: chain's outer middlewares and Dedup (on fast, or store), around
// the batch handler of the LoyaltyPointsCredited events (Shop.LoyaltyPointsCreditedBatch), whose aggregate
// is the account: a batch's credits run in account order.
func loyaltyChain(s *shop.Shop, store *dedup.Store, fast dedup.TxStore, m *metrics.Metrics, log *zap.Logger) (consumer.Handler, error) {
	observed, eventID, deduped, err := exampleMiddlewares(store, fast, m)
	if err != nil {
		return nil, err
	}
	return middleware.Chain(dedup.HandleBatchJSON(s.LoyaltyPointsCreditedBatch),
		observed, middleware.Recover(log), middleware.Classify(),
		eventID, middleware.Deadline(0), deduped)
}

// exampleMiddlewares returns the example chains' Metrics on m, EventID (exampleEventID) and Dedup on fast,
// or on store when fast is nil.
func exampleMiddlewares(store *dedup.Store, fast dedup.TxStore, m *metrics.Metrics) (observed, eventID, deduped middleware.Middleware, err error) {
	if fast == nil {
		fast = store
	}
	if observed, err = middleware.Metrics(m); err != nil {
		return observed, eventID, deduped, err
	}
	if eventID, err = exampleEventID(); err != nil {
		return observed, eventID, deduped, err
	}
	deduped, err = middleware.Dedup(fast)
	return observed, eventID, deduped, err
}

// exampleEventID reads the event ID from the EVENT_ID property, else the body's eventId; the type and the
// aggregate from EVENT_TYPE (else the tag) and AGGREGATE_ID.
func exampleEventID() (middleware.Middleware, error) {
	return middleware.EventID(middleware.EventIDConfig{
		Extractors: []middleware.Extractor{middleware.FromProperty(shop.PropEventID), middleware.FromJSONField("eventId")},
	})
}
