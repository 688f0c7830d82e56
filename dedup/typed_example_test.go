package dedup_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
)

// OrderCreated is the JSON body of the README's typed handler example.
type OrderCreated struct {
	OrderNo  string `json:"orderNo"`
	Quantity int    `json:"quantity"`
}

// typedHandler is the README's "Typed handlers" example; Example_typedHandler keeps it compiling.
func typedHandler() consumer.Handler {
	return dedup.HandleJSON(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, e OrderCreated) (consumer.Outcome, error) {
		// e is the decoded body; the event ID is still d.EventID
		_, err := tx.ExecContext(ctx, "INSERT INTO orders (order_no, quantity) VALUES (?, ?)", e.OrderNo, e.Quantity)
		return consumer.Processed(), err
	})
}

// Example_typedHandler shows a transactional handler that gets the body decoded into its own type; it
// takes the place of dedup.Handle in the chain (the README's wiring). It is compiled, not run: it needs a
// database.
func Example_typedHandler() {
	_ = typedHandler
}

// The README's "Typed handlers" code block is typedHandler's returned expression, line for line (leading
// blanks aside), so the code users copy is the code that compiles.
func TestREADMETypedHandlerIsTheCompiledExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n### Typed handlers\n")
	require.True(t, ok, "README has no \"### Typed handlers\" section")
	_, block, ok := strings.Cut(section, "```go\n")
	require.True(t, ok)
	block, _, ok = strings.Cut(block, "\n```")
	require.True(t, ok)

	src, err := os.ReadFile("typed_example_test.go")
	require.NoError(t, err)
	_, body, ok := strings.Cut(string(src), "func typedHandler() consumer.Handler {\n\treturn ")
	require.True(t, ok)
	body, _, ok = strings.Cut(body, "\n}\n")
	require.True(t, ok)
	require.Equal(t, lines(block), lines(body))
}

// lines returns s's lines without their leading and trailing blanks.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, strings.TrimSpace(l))
	}
	return out
}
