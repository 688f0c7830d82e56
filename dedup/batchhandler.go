package dedup

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/collect"
	"github.com/rmqguard/rmqguard/internal/pending"
)

// BatchTxHandler is a business handler for several deliveries at once, all new (their dedup rows are
// claimed in tx): it writes their effects through tx, e.g. in multi-row statements, and returns one
// outcome per delivery, in order (what a TxHandler would return for each). An error fails every delivery.
type BatchTxHandler func(ctx context.Context, tx *sqlx.Tx, ds []*consumer.Delivery) ([]consumer.Outcome, error)

// HandleBatch adapts h into a consumer.Handler, a Handle result (the chain needs middleware.Dedup). In a
// batch's first pass h runs once with the batch's new deliveries; in the careful pass, and with BatchSize 1,
// with one delivery at a time (the package doc, "Batches"). Its context carries the transaction. A nil h is
// refused as Handle refuses a nil handler.
func HandleBatch(h BatchTxHandler) consumer.Handler {
	if h == nil {
		return pending.Refuse[consumer.Delivery](errNilBatchHandler, consumer.DeadLetter)
	}
	return newBatchHandler(h, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		return one(h(ctx, tx, []*consumer.Delivery{d}))
	})
}

// errNilBatchHandler is why HandleBatch(nil) is refused.
var errNilBatchHandler = errors.New("dedup.HandleBatch: the handler function is nil")

// one is the outcome of a batch handler called with one delivery.
func one(outs []consumer.Outcome, err error) (consumer.Outcome, error) {
	switch {
	case err != nil:
		return consumer.Outcome{}, err
	case len(outs) != 1:
		return consumer.Outcome{}, fmt.Errorf("dedup: a batch handler returned %d outcomes for 1 delivery", len(outs))
	}
	return outs[0], nil
}

// batchHandler is a BatchTxHandler adapted by HandleBatch (h), with what handles one delivery alone
// (alone); its pointer names it to the collector.
type batchHandler struct {
	h     BatchTxHandler
	alone TxHandler
}

// newBatchHandler returns the Handle result of a batch handler.
func newBatchHandler(h BatchTxHandler, alone TxHandler) consumer.Handler {
	return Handle((&batchHandler{h: h, alone: alone}).handle)
}

// handle adds d to the batch's collector when there is one (see HandleBatch), else handles it alone.
func (b *batchHandler) handle(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
	if c := collect.From(ctx); c != nil {
		c.Add(b, b.run, d)
		o := consumer.Processed()
		o.Reason = "collected for its batch handler"
		return o, nil
	}
	return b.alone(ctx, tx, d)
}

// run calls h with ds and the transaction of ctx.
func (b *batchHandler) run(ctx context.Context, ds []*consumer.Delivery) ([]consumer.Outcome, error) {
	tx, ok := TxFromContext(ctx)
	if !ok {
		return nil, ErrNoTx
	}
	return b.h(ctx, tx, ds)
}

// TypedBatchTxHandler is a BatchTxHandler whose deliveries' bodies were decoded: msgs[i] is ds[i]'s.
type TypedBatchTxHandler[T any] func(ctx context.Context, tx *sqlx.Tx, ds []*consumer.Delivery, msgs []T) ([]consumer.Outcome, error)

// HandleBatchJSON is HandleBatch for JSON bodies decoded into a new T each (as HandleJSON decodes them):
// a delivery whose body does not decode is left out of fn's call and dead-lettered (consumer.DecodeAs). A
// nil fn panics here, at construction.
func HandleBatchJSON[T any](fn TypedBatchTxHandler[T]) consumer.Handler {
	if fn == nil {
		panic("dedup.HandleBatchJSON: the handler function is nil")
	}
	codec := consumer.JSON{}
	alone := Typed(codec, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, msg T) (consumer.Outcome, error) {
		return one(fn(ctx, tx, []*consumer.Delivery{d}, []T{msg}))
	})
	return newBatchHandler(func(ctx context.Context, tx *sqlx.Tx, ds []*consumer.Delivery) ([]consumer.Outcome, error) {
		outs := make([]consumer.Outcome, len(ds))
		var (
			decoded []*consumer.Delivery
			msgs    []T
			at      []int
		)
		for i, d := range ds {
			msg, o, err := consumer.DecodeAs[T](codec, d)
			if err != nil {
				outs[i] = o // a dead letter: the careful pass decides it alone
				continue
			}
			decoded, msgs, at = append(decoded, d), append(msgs, msg), append(at, i)
		}
		if len(decoded) == 0 {
			return outs, nil
		}
		got, err := fn(ctx, tx, decoded, msgs)
		if err != nil {
			return nil, err
		}
		if len(got) != len(decoded) {
			return nil, fmt.Errorf("dedup: a batch handler returned %d outcomes for %d deliveries", len(got), len(decoded))
		}
		for j, i := range at {
			outs[i] = got[j]
		}
		return outs, nil
	}, alone)
}
