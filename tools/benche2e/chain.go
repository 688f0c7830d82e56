package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
)

// shutdownTimeout bounds a consumer's shutdown after its drain.
const shutdownTimeout = 30 * time.Second

// startRmqguard drains b through consumer.New and the standard chain (Metrics, Recover with a no-op
// logger, Classify, EventID, Deadline(0) — the deadline is consumer.Config.HandlerTimeout,
// -handler-timeout —, Dedup on the store, wrapped by
// layer unless nil) around a handler that inserts the same business row as the baseline, with
// consumer.Config.BatchSize batch.
func startRmqguard(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker, batch int, layer layerFunc) (func(), error) {
	bizTable := tableName(group, "orders")
	if err := createBusinessTable(ctx, env, bizTable); err != nil {
		return nil, err
	}
	env.cleanup.scope(group)
	return startChain(env, o, b, group, tr, batch, layer, dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if err := insertBusinessRow(ctx, tx, bizTable, d.EventID); err != nil {
			return consumer.Outcome{}, err
		}
		return consumer.Processed(), nil
	}))
}

// startDuplicates drains b through the rmqguard variant after marking all its events processed in the
// group's dedup scope: every message is a duplicate.
func startDuplicates(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
	if err := markProcessed(ctx, env, group, b); err != nil {
		return nil, err
	}
	return startRmqguard(ctx, env, o, b, group, tr, 1, nil)
}

// layerFunc wraps the dedup store of a variant in a fast-path layer (the Redis variant); nil keeps the store.
type layerFunc func(store *dedup.Store) (dedup.TxStore, error)

// startChain builds the chain around h (a dedup.Handle result, or another adapter of the dedup package) on
// the store (wrapped by layer when it is not nil) and starts the consumer, whose final decisions report
// each message handled for good to tr (observer).
func startChain(env *environment, o options, b backlog, group string, tr *tracker, batch int, layer layerFunc, h consumer.Handler) (func(), error) {
	return startChainWith(env, o, b, group, tr, batch, layer, nil, func(*dedup.Store) (consumer.Handler, func(), error) {
		return h, func() {}, nil
	})
}

// handlerOn builds a variant's handler on its store; after is called once the consumer has shut down,
// before the store is closed.
type handlerOn func(store *dedup.Store) (h dedup.TxHandler, after func(), err error)

// startChainOn is startChain on a store opened with the extra options storeOpts (a table prefix), around
// the handler mk builds on that store.
func startChainOn(env *environment, o options, b backlog, group string, tr *tracker, batch int, layer layerFunc,
	storeOpts []dedup.Option, mk handlerOn) (func(), error) {
	return startChainWith(env, o, b, group, tr, batch, layer, storeOpts, func(store *dedup.Store) (consumer.Handler, func(), error) {
		h, after, err := mk(store)
		if err != nil {
			return nil, nil, err
		}
		return dedup.Handle(h), after, nil
	})
}

// startChainWith is startChainOn around the consumer.Handler mk builds (a dedup.Handle result, or another
// adapter of the dedup package). The consumer's decisions and lost batches are counted in tr.consumer.
func startChainWith(env *environment, o options, b backlog, group string, tr *tracker, batch int, layer layerFunc,
	storeOpts []dedup.Option, mk func(store *dedup.Store) (h consumer.Handler, after func(), err error)) (func(), error) {
	opts := append([]dedup.Option(nil), storeOpts...)
	if !o.sharedTxPool {
		opts = append(opts, dedup.WithTxDSN(o.dsn))
	}
	store, err := dedup.NewStore(env.db, opts...)
	if err != nil {
		return nil, err
	}
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	var txStore dedup.TxStore = store
	if layer != nil {
		if txStore, err = layer(store); err != nil {
			_ = store.Close()
			return nil, err
		}
	}
	h, after, err := mk(store)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	handler, err := chain(txStore, m, o, h)
	if err != nil {
		after()
		_ = store.Close()
		return nil, err
	}
	cfg := consumer.Config{
		NameServers:          env.nameServers,
		Group:                group,
		Subscriptions:        []consumer.Subscription{{Topic: b.topic}},
		ConsumeGoroutines:    o.goroutines,
		BatchSize:            batch,
		HandlerTimeout:       o.handlerTimeout,
		StartFromFirstOffset: true,
	}
	tr.consumer = &consumerCounts{batch: batch}
	c, err := consumer.New(cfg, handler, consumer.WithHealthProbe(store), consumer.WithObserver(observer{m, tr.consumer, tr}),
		consumer.WithLogger(tr.consumer.logger()))
	if err != nil {
		after()
		_ = store.Close()
		return nil, err
	}
	if err := c.Start(); err != nil {
		after()
		_ = store.Close()
		return nil, fmt.Errorf("rmqguard consumer %s: %w", group, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = c.Shutdown(ctx)
		after()
		_ = store.Close()
	}, nil
}

// chain is the standard chain of the README and the example consumer, outermost first, without the
// example's domain steps (order aggregate check, version). middleware.Logging is not in it: it is a
// debugging aid outside the recommended chain (the consumer logs each final decision itself).
func chain(store dedup.TxStore, m *metrics.Metrics, o options, h consumer.Handler) (consumer.Handler, error) {
	eventID, err := middleware.EventID(middleware.EventIDConfig{
		Extractors: []middleware.Extractor{middleware.FromProperty("EVENT_ID"), middleware.FromJSONField("eventId")},
	})
	if err != nil {
		return nil, err
	}
	metricsMW, err := middleware.Metrics(m)
	if err != nil {
		return nil, err
	}
	dedupMW, err := middleware.Dedup(store)
	if err != nil {
		return nil, err
	}
	return middleware.Chain(h, metricsMW, middleware.Recover(zap.NewNop()),
		middleware.Classify(), eventID, middleware.Deadline(0), dedupMW) // Deadline(0): HandlerTimeout, inline
}
