package dedup_test

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
)

// ExampleStates_Transition moves an order WAIT_PAY → PAID inside the dedup transaction, with the
// event's version (middleware.Version fills Delivery.Version). Compiled, not run: it needs a database.
func ExampleStates_Transition() {
	orders, err := dedup.NewStates(dedup.StateTable{Table: "orders", KeyColumn: "order_no"}) // status, version
	if err != nil {
		panic(err) // names the bad field
	}
	paid := dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		r, err := orders.Transition(ctx, tx, dedup.Transition{
			Key: d.AggregateID, From: []string{"WAIT_PAY"}, To: "PAID", Version: d.Version})
		switch {
		case err != nil:
			return consumer.Outcome{}, err
		case r == dedup.TransitionApplied:
			return consumer.Processed(), nil
		case r == dedup.TransitionStale:
			return consumer.Stale("order already past v" + fmt.Sprint(d.Version)), nil
		case r == dedup.TransitionIllegal:
			return consumer.DeadLetter("order not in WAIT_PAY"), nil
		}
		return consumer.Retry(0, "order "+r.String()), nil // ahead or missing: an earlier event is still to come
	})
	_ = paid
}

// reserveOnce is docs/versions.md's business action, line for line: an inventory change applied once,
// whether the message or a compensation job gets there first.
func reserveOnce() (func(ctx context.Context, tx *sqlx.Tx, changeID, sku string, qty int) error, error) {
	changes, err := dedup.NewActions(dedup.ActionTable{Table: "inventory_change", KeyColumn: "change_id"})
	if err != nil {
		return nil, err // names the field whose identifier is invalid
	}
	reserve := func(ctx context.Context, tx *sqlx.Tx, changeID, sku string, qty int) error {
		r, err := changes.Record(ctx, tx, changeID, map[string]any{"sku_id": sku, "quantity": -qty})
		if err != nil || r == dedup.ActionAlreadyApplied {
			return err // already applied: its stock update exists too
		}
		_, err = tx.ExecContext(ctx, "UPDATE inventory SET on_hand = on_hand - ? WHERE sku_id = ?", qty, sku)
		return err
	}
	return reserve, nil
}

// ExampleActions_Record applies an inventory change once, whether the message or a compensation job
// gets there first. Compiled, not run: it needs a database.
func ExampleActions_Record() {
	_ = reserveOnce
}
