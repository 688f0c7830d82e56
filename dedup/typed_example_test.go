package dedup_test

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
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

// The "Typed handlers" code block of docs/wiring-and-handlers.md is typedHandler's returned expression, line
// for line (leading blanks aside), so the code users copy is the code that compiles.
func TestREADMETypedHandlerIsTheCompiledExample(t *testing.T) {
	block := testenv.DocBlock(t, "docs/wiring-and-handlers.md", "## Typed handlers")
	body := testenv.Between(t, "typed_example_test.go", "func typedHandler() consumer.Handler {\n\treturn ", "\n}\n")
	require.Equal(t, testenv.Lines(block), testenv.Lines(body))
}
