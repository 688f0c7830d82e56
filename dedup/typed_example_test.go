package dedup_test

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/retry"
)

// OrderCreated is the JSON body of the typed handler example of docs/wiring-and-handlers.md.
type OrderCreated struct {
	OrderNo  string `json:"orderNo"`
	Quantity int    `json:"quantity"`
}

// typedHandler is the "Typed handlers" example of docs/wiring-and-handlers.md; Example_typedHandler keeps
// it compiling.
func typedHandler() consumer.Handler {
	return dedup.HandleJSON(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, e OrderCreated) (consumer.Outcome, error) {
		// e is the decoded body; the event ID is still d.EventID
		_, err := tx.ExecContext(ctx, "INSERT INTO orders (order_no, quantity) VALUES (?, ?)", e.OrderNo, e.Quantity)
		return consumer.Processed(), err
	})
}

// Example_typedHandler shows a transactional handler that gets the body decoded into its own type; it
// takes the place of dedup.Handle in the chain (the guide's wiring). It is compiled, not run: it needs a
// database.
func Example_typedHandler() {
	_ = typedHandler
}

// OrderPaid is the second event type of the "Several event types" example of docs/wiring-and-handlers.md.
type OrderPaid struct {
	OrderNo string `json:"orderNo"`
}

// routedHandler is the "Several event types" example of docs/wiring-and-handlers.md; Example_routedHandler
// keeps it compiling.
func routedHandler() consumer.Handler {
	byType := map[string]dedup.TxHandler{ // each event type's body decoded into its own type
		"OrderCreated": dedup.Typed(consumer.JSON{}, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, e OrderCreated) (consumer.Outcome, error) {
			_, err := tx.ExecContext(ctx, "INSERT INTO orders (order_no, quantity) VALUES (?, ?)", e.OrderNo, e.Quantity)
			return consumer.Processed(), err
		}),
		"OrderPaid": dedup.Typed(consumer.JSON{}, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, e OrderPaid) (consumer.Outcome, error) {
			_, err := tx.ExecContext(ctx, "UPDATE orders SET paid = TRUE WHERE order_no = ?", e.OrderNo)
			return consumer.Processed(), err
		}),
	}
	return dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if h, ok := byType[d.EventType]; ok { // the EVENT_TYPE property, else the tag
			return h(ctx, tx, d)
		}
		return consumer.Outcome{}, retry.Permanentf("unknown event type %q", d.EventType) // the DLQ, with this reason
	})
}

// Example_routedHandler shows one transactional handler for several event types, each decoded into its own
// type; it takes the place of dedup.Handle in the chain (the guide's wiring). It is compiled, not run: it
// needs a database.
func Example_routedHandler() {
	_ = routedHandler
}

// batchHandler is the "Batch consumption" example of docs/batch-and-orderly.md; Example_batchHandler keeps it
// compiling.
func batchHandler() consumer.Handler {
	return dedup.HandleBatchJSON(func(ctx context.Context, tx *sqlx.Tx, ds []*consumer.Delivery, msgs []OrderCreated) ([]consumer.Outcome, error) {
		// ds: the batch's new members (its duplicates are left out); msgs[i] is ds[i]'s body, decoded
		query, args := "INSERT INTO orders (order_no, quantity) VALUES ", make([]any, 0, 2*len(msgs))
		outs := make([]consumer.Outcome, len(ds))
		for i, e := range msgs {
			if i > 0 {
				query += ", "
			}
			query, args = query+"(?, ?)", append(args, e.OrderNo, e.Quantity)
			outs[i] = consumer.Processed()
		}
		_, err := tx.ExecContext(ctx, query, args...) // one statement for the batch; an error retries every member
		return outs, err
	})
}

// Example_batchHandler shows a batch handler that writes all new members of a batch in one statement, in the
// batch's one transaction. It is compiled, not run: it needs a database.
func Example_batchHandler() {
	_ = batchHandler
}

// The "Typed handlers" and "Several event types" code blocks of docs/wiring-and-handlers.md and the "Batch
// consumption" one of docs/batch-and-orderly.md are typedHandler's and batchHandler's returned expressions and
// routedHandler's body, line for line (leading blanks aside), so the code users copy is the code that compiles.
func TestREADMETypedHandlersAreTheCompiledExamples(t *testing.T) {
	for _, c := range []struct{ doc, heading, start string }{
		{"docs/wiring-and-handlers.md", "## Typed handlers", "func typedHandler() consumer.Handler {\n\treturn "},
		{"docs/wiring-and-handlers.md", "## Several event types", "func routedHandler() consumer.Handler {\n"},
		{"docs/batch-and-orderly.md", "## Batch consumption", "func batchHandler() consumer.Handler {\n\treturn "},
	} {
		block := testenv.DocBlock(t, c.doc, c.heading)
		body := testenv.Between(t, "typed_example_test.go", c.start, "\n}\n")
		require.Equal(t, testenv.Lines(block), testenv.Lines(body), c.heading)
	}
}
