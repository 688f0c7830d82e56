package dedup_test

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/pending"
)

func TestIsTxHandler_RecognisesHandleResultsOnly(t *testing.T) {
	calls := 0
	tx := func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		calls++
		return consumer.Processed(), nil
	}
	typed := func() consumer.Handler { return dedup.Handle(tx) } // an adapter built by calling Handle
	plain := func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		calls++
		return consumer.Processed(), nil
	}
	h := dedup.Handle(tx)
	hidden := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) { return h.Handle(ctx, d) }

	assert.True(t, dedup.IsTxHandler(dedup.Handle(tx)))
	assert.True(t, dedup.IsTxHandler(typed()))
	assert.False(t, dedup.IsTxHandler(consumer.HandlerFunc(plain)))
	assert.False(t, dedup.IsTxHandler(consumer.HandlerFunc(hidden)), "a function of its own around Handle's result is not recognised")
	assert.False(t, dedup.IsTxHandler(nil))
	assert.Zero(t, calls, "IsTxHandler never calls the handler")
}

// Handle(nil) is a wiring mistake: it is a refused handler (consumer.New fails naming it), not a handler that
// panics on every message.
func TestHandle_NilHandlerIsRefused(t *testing.T) {
	h := dedup.Handle(nil)
	err := pending.Refused(h)
	assert.ErrorContains(t, err, "dedup.Handle: the handler function is nil")
	o, herr := h.Handle(context.Background(), &consumer.Delivery{})
	assert.NoError(t, herr)
	assert.Equal(t, consumer.KindDeadLetter, o.Kind, "run anyway (hidden from consumer.New), it dead-letters instead of panicking")
}
