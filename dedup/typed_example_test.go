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

// The "Typed handlers" and "Several event types" code blocks of docs/wiring-and-handlers.md are typedHandler's
// returned expression and routedHandler's body, line for line (leading blanks aside), so the code users copy
// is the code that compiles.
func TestREADMETypedHandlersAreTheCompiledExamples(t *testing.T) {
	for heading, start := range map[string]string{
		"## Typed handlers":      "func typedHandler() consumer.Handler {\n\treturn ",
		"## Several event types": "func routedHandler() consumer.Handler {\n",
	} {
		block := testenv.DocBlock(t, "docs/wiring-and-handlers.md", heading)
		body := testenv.Between(t, "typed_example_test.go", start, "\n}\n")
		require.Equal(t, testenv.Lines(block), testenv.Lines(body), heading)
	}
}
