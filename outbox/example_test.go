package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/outbox"
)

// OrderPaid is the JSON body of the outbox example of docs/effects.md.
type OrderPaid struct {
	OrderNo string `json:"orderNo"`
}

// withOutbox is the outbox example of docs/effects.md; Example_outbox keeps it compiling.
func withOutbox(ctx context.Context, store *dedup.Store, cfg consumer.Config, notify outbox.EffectFunc) (*consumer.Consumer, error) {
	if _, err := outbox.Migrate(ctx, store.DB().DB, store.TablePrefix()); err != nil { // rmqguard_outbox
		return nil, err
	}
	ob, err := outbox.New(store, outbox.Config{NameServers: cfg.NameServers,
		Effects: map[string]outbox.EffectFunc{"notify": notify}}) // the effects this process runs, by name
	if err != nil {
		return nil, err
	}
	paid := dedup.HandleJSON(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, e OrderPaid) (consumer.Outcome, error) {
		if _, err := tx.ExecContext(ctx, "UPDATE orders SET paid = TRUE WHERE order_no = ?", e.OrderNo); err != nil {
			return consumer.Outcome{}, err
		}
		body, err := json.Marshal(e)
		if err != nil {
			return consumer.Outcome{}, err
		}
		// both rows commit with the UPDATE, or not at all; the relay sends the message and runs the effect after it
		if _, err := ob.Send(ctx, d, outbox.Message{Name: "points", Topic: "LOYALTY", Tag: "OrderPaid", Body: body}); err != nil {
			return consumer.Outcome{}, err
		}
		_, err = ob.Do(ctx, d, "notify", body) // notify gets Effect.IdempotencyKey, the same on every run
		return consumer.Processed(), err
	})
	handler, err := middleware.Standard(paid, middleware.StandardConfig{Store: store})
	if err != nil {
		return nil, err
	}
	return consumer.New(cfg, handler, consumer.WithBackground(ob.Run)) // Start starts the relay; Shutdown stops it
}

// Example_outbox shows a handler that records a follow-up message and a durable effect in its transaction,
// and the relay that sends and runs them living with the consumer. It is compiled, not run: it needs a
// database and a broker.
func Example_outbox() {
	_ = withOutbox
}

// The "Effects outside the database" code block of docs/effects.md is withOutbox's body, line for line
// (leading blanks aside), so the code users copy is the code that compiles.
func TestREADMEOutboxIsTheCompiledExample(t *testing.T) {
	block := testenv.DocBlock(t, "docs/effects.md", "## Effects outside the database")
	body := testenv.Between(t, "example_test.go",
		"func withOutbox(ctx context.Context, store *dedup.Store, cfg consumer.Config, notify outbox.EffectFunc) (*consumer.Consumer, error) {\n", "\n}\n")
	require.Equal(t, testenv.Lines(block), testenv.Lines(body))
}
