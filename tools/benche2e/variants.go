package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Variant names, in the order the default run drains them.
const (
	variantRaw      = "raw"
	variantBaseline = "baseline"
	variantRmqguard = "rmqguard"
	variantBatch    = "rmqguard-batch"
	// variantOutbox is rmqguard plus one outbox message per event, relayed in the same process.
	variantOutbox = "rmqguard-outbox"
	// variantHandwrittenBatch is the hand-written batch consumer: the baseline's rows of a whole callback
	// (batchSize messages) in one transaction, no savepoints.
	variantHandwrittenBatch = "handwritten-batch"
	// variantBatchCeiling is one transaction per callback with only the business rows, no dedup: the ceiling
	// of any batch dedup design with this handler.
	variantBatchCeiling = "batch-ceiling"
	// variantHandwrittenMultirow is the hand-written batch consumer at its best: per callback one transaction
	// with one multi-row claim of the dedup rows and one multi-row INSERT of the business rows.
	variantHandwrittenMultirow = "handwritten-multirow"
	// variantHandwrittenClaimBatch is handwritten-multirow with one business INSERT per message: rmqguard-batch's
	// happy-path statements (one multi-row claim, a per-message handler's writes, COMMIT) written by hand.
	variantHandwrittenClaimBatch = "handwritten-claim-batch"
	// variantBatchHandler is rmqguard-batch with a batch handler (dedup.HandleBatch) writing the business
	// rows of a batch in one multi-row INSERT.
	variantBatchHandler = "rmqguard-batch-handler"
	// variantHotrow and variantHotrowBatch drain the hot-row backlog (hotrow.go) through rmqguard, per
	// message and with BatchSize batchSize.
	variantHotrow      = "hotrow"
	variantHotrowBatch = "hotrow-batch"
	// variantHotrowBatchHandler drains the hot-row backlog with BatchSize batchSize through a batch handler
	// (dedup.HandleBatchJSON): one multi-row ledger INSERT and one balance upsert per batch, in account order.
	variantHotrowBatchHandler = "hotrow-batch-handler"
	// variantHotrowHandwrittenBatch drains the hot-row backlog with a hand-written batch consumer sending
	// hotrow-batch's statements (hotrow_handwritten.go): the reference of the per-member hot-row target.
	variantHotrowHandwrittenBatch = "handwritten-hotrow-batch"
	variantDuplicates             = "duplicates"
	// variantDuplicatesRedis drains the duplicates backlog with the dedup store wrapped in the Redis fast
	// path (dedup/redisfast), every event's done key written beforehand: each message is answered by Redis.
	variantDuplicatesRedis = "duplicates-redis"
)

// batchSize is the messages per callback (ConsumeMessageBatchMaxSize) of the batch variants: consumer.Config.BatchSize
// of rmqguard-batch, rmqguard-batch-handler and hotrow-batch; handwritten-batch, handwritten-claim-batch,
// handwritten-multirow and batch-ceiling. 32, the client's default pull batch.
const batchSize = 32

// errNotAvailable is returned by a variant that cannot run yet; its row shows n/a.
type errNotAvailable struct{ why string }

func (e errNotAvailable) Error() string { return e.why }

// drainFunc drains backlog b with one fresh consumer group: it sets up the variant's tables, starts its
// consumer, which reports each handled message to tr, and returns a function that shuts the consumer down.
type drainFunc func(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (stop func(), err error)

// variants returns every variant by name.
func variants() map[string]drainFunc {
	return map[string]drainFunc{
		variantRaw:      startRaw,
		variantBaseline: startBaseline,
		variantRmqguard: func(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
			return startRmqguard(ctx, env, o, b, group, tr, 1, nil)
		},
		variantOutbox: startRmqguardOutbox,
		variantBatch: func(ctx context.Context, env *environment, o options, b backlog, group string, tr *tracker) (func(), error) {
			return startRmqguard(ctx, env, o, b, group, tr, batchSize, nil)
		},
		variantHandwrittenBatch:       startHandwrittenBatch,
		variantBatchCeiling:           startBatchCeiling,
		variantHandwrittenMultirow:    startHandwrittenMultirow,
		variantHandwrittenClaimBatch:  startHandwrittenClaimBatch,
		variantBatchHandler:           startBatchHandler,
		variantHotrow:                 startHotrow(1),
		variantHotrowBatch:            startHotrow(batchSize),
		variantHotrowBatchHandler:     startHotrowBatchHandler(),
		variantHotrowHandwrittenBatch: startHotrowHandwrittenBatch,
		variantDuplicates:             startDuplicates,
		variantDuplicatesRedis:        startDuplicatesRedis,
	}
}

// defaultVariants is the -variants default: all of them, in drain order.
var defaultVariants = strings.Join([]string{variantRaw, variantBaseline, variantRmqguard, variantOutbox, variantBatch,
	variantHandwrittenBatch, variantBatchCeiling, variantHandwrittenClaimBatch, variantHandwrittenMultirow, variantBatchHandler, variantHotrow, variantHotrowBatch,
	variantHotrowHandwrittenBatch, variantHotrowBatchHandler, variantDuplicates, variantDuplicatesRedis}, ",")

// parseVariants splits a comma list of variant names, rejecting unknown and repeated names.
func parseVariants(list string) ([]string, error) {
	known := variants()
	var out []string
	seen := map[string]bool{}
	for _, v := range strings.Split(list, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if _, ok := known[v]; !ok {
			names := make([]string, 0, len(known))
			for k := range known {
				names = append(names, k)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("-variants: unknown variant %q (known: %s)", v, strings.Join(names, ", "))
		}
		if seen[v] {
			return nil, fmt.Errorf("-variants: %q given twice", v)
		}
		seen[v] = true
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-variants: no variant named")
	}
	return out, nil
}
