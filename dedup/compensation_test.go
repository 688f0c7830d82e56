package dedup_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
)

// s6Actions is the number of business actions each S6 run races on.
const s6Actions = 50

// raceDomain is one kind of business action: a unique-keyed action row and the effect it
// carries (stock or balance), applied only when the action row was inserted.
type raceDomain struct {
	actions *dedup.Actions
	// columns are the action row's columns of action i (besides its ID).
	columns func(i int) map[string]any
	// effect applies action i's effect in tx.
	effect func(ctx context.Context, tx *sqlx.Tx, i int) error
}

// raceTally counts what the two sides found.
type raceTally struct {
	applied, already, retries atomic.Int64
}

// apply records action id and applies its effect when the record was inserted.
func (d raceDomain) apply(ctx context.Context, tx *sqlx.Tx, i int, id string, tally *raceTally) error {
	r, err := d.actions.Record(ctx, tx, id, d.columns(i))
	if err != nil {
		return err
	}
	if r == dedup.ActionAlreadyApplied {
		tally.already.Add(1)
		return nil
	}
	if err := d.effect(ctx, tx, i); err != nil {
		return err
	}
	tally.applied.Add(1)
	return nil
}

// compensationRace runs, for every action, the message path (middleware.Dedup with the real store, the action ID
// in the ACTION_ID property) and a compensation job (its own transaction) on the same action ID; order
// says how the two meet. A deadlock or lock wait (transient) is retried as the consumer and a job would;
// any other error fails the test. It returns the tallies of the two sides.
func compensationRace(t *testing.T, db *sqlx.DB, d raceDomain, order string) (msg, comp *raceTally) {
	t.Helper()
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	group, prefix := testenv.Unique("cg-s6"), testenv.Unique("act")
	msg, comp = &raceTally{}, &raceTally{}
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	chain := testenv.Must(middleware.Chain(dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, dl *consumer.Delivery) (consumer.Outcome, error) {
		var i int
		_, _ = fmt.Sscanf(dl.Msg.GetProperty("ACTION_INDEX"), "%d", &i)
		return consumer.Processed(), d.apply(ctx, tx, i, dl.Msg.GetProperty("ACTION_ID"), msg)
	}), middleware.Recover(zap.NewNop()), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))))

	message := func(i int) {
		m := &primitive.MessageExt{MsgId: testenv.Unique("msg"), Message: primitive.Message{Topic: "INVENTORY"}}
		m.WithProperty("EVENT_ID", fmt.Sprintf("%s-ev-%d", prefix, i))
		m.WithProperty("ACTION_ID", fmt.Sprintf("%s-%d", prefix, i))
		m.WithProperty("ACTION_INDEX", fmt.Sprint(i))
		for {
			o, err := chain.Handle(context.Background(), testenv.NewDelivery(group, m))
			res := testenv.AnswerTo(t, o, err)
			if res.Result == rmq.ConsumeSuccess {
				assert.Equal(t, consumer.KindProcessed, o.Kind, "message %d: %v", i, o)
				return
			}
			if !assert.Equal(t, retry.ClassTransient, retry.Classify(err), "message %d: %v", i, err) {
				return
			}
			msg.retries.Add(1)
			m.ReconsumeTimes++ // the broker's redelivery of the same message
		}
	}
	compensate := func(i int) {
		for {
			tx, err := db.BeginTxx(context.Background(), nil)
			if !assert.NoError(t, err) {
				return
			}
			err = d.apply(context.Background(), tx, i, fmt.Sprintf("%s-%d", prefix, i), comp)
			if err == nil {
				err = tx.Commit()
			} else {
				_ = tx.Rollback()
			}
			if err == nil {
				return
			}
			if !assert.Equal(t, retry.ClassTransient, retry.Classify(err), "compensation %d: %v", i, err) {
				return
			}
			comp.retries.Add(1)
		}
	}

	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range s6Actions {
		switch order {
		case "concurrent": // both released at once by the barrier
			wg.Add(2)
			go func() { defer wg.Done(); <-start; message(i) }()
			go func() { defer wg.Done(); <-start; compensate(i) }()
		case "message first":
			wg.Add(1)
			go func() { defer wg.Done(); <-start; message(i); compensate(i) }()
		case "compensation first":
			wg.Add(1)
			go func() { defer wg.Done(); <-start; compensate(i); message(i) }()
		default:
			t.Fatalf("unknown order %q", order)
		}
	}
	close(start)
	wg.Wait()

	// Every message committed its dedup row, whether its action was applied or already applied.
	var rows int
	require.NoError(t, db.Get(&rows, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ?`, group))
	assert.Equal(t, s6Actions, rows, "processed_event rows")
	t.Logf("%s: message applied=%d already=%d retries=%d; compensation applied=%d already=%d retries=%d", order,
		msg.applied.Load(), msg.already.Load(), msg.retries.Load(), comp.applied.Load(), comp.already.Load(), comp.retries.Load())
	// One effect per action: one side applied it, the other found it applied.
	assert.EqualValues(t, s6Actions, msg.applied.Load()+comp.applied.Load(), "actions applied")
	assert.EqualValues(t, s6Actions, msg.already.Load()+comp.already.Load(), "actions found already applied")
	switch order {
	case "message first":
		assert.EqualValues(t, s6Actions, msg.applied.Load())
	case "compensation first":
		assert.EqualValues(t, s6Actions, comp.applied.Load())
	}
	return msg, comp
}

var s6Orders = []string{"concurrent", "message first", "compensation first"}

// S6: a compensation job returning stock and the message
// carrying the same inventory_change (change_id, under its own unique key) give one effect.
func TestDedup_CompensationAndMessageOnOneInventoryChangeGiveOneEffect(t *testing.T) {
	db := testenv.MySQL(t)
	for _, order := range s6Orders {
		t.Run(order, func(t *testing.T) {
			changes := tempTable(t, db, "s6_inv_change", `CREATE TABLE %s (
				id        BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
				change_id VARCHAR(128) NOT NULL,
				sku_id    VARCHAR(64)  NOT NULL,
				quantity  INT          NOT NULL,
				UNIQUE KEY uk_change_id (change_id)
			) ENGINE=InnoDB`)
			stock := tempTable(t, db, "s6_stock", `CREATE TABLE %s (
				sku_id VARCHAR(64) NOT NULL PRIMARY KEY, on_hand BIGINT NOT NULL) ENGINE=InnoDB`)
			const initial = 1000
			_, err := db.Exec("INSERT INTO "+stock+" VALUES ('sku-1', ?)", initial)
			require.NoError(t, err)
			actions, err := dedup.NewActions(dedup.ActionTable{Table: changes, KeyColumn: "change_id", KeyName: "uk_change_id"})
			require.NoError(t, err)
			quantity := func(i int) int { return i + 1 } // distinct, so a doubled effect shows in the sum

			compensationRace(t, db, raceDomain{
				actions: actions,
				columns: func(i int) map[string]any { return map[string]any{"sku_id": "sku-1", "quantity": quantity(i)} },
				effect: func(ctx context.Context, tx *sqlx.Tx, i int) error {
					_, err := tx.ExecContext(ctx, "UPDATE "+stock+" SET on_hand = on_hand + ? WHERE sku_id = 'sku-1'", quantity(i))
					return err
				},
			}, order)

			var rows, onHand, sum int
			require.NoError(t, db.Get(&rows, "SELECT COUNT(*) FROM "+changes))
			require.NoError(t, db.Get(&sum, "SELECT COALESCE(SUM(quantity), 0) FROM "+changes))
			require.NoError(t, db.Get(&onHand, "SELECT on_hand FROM "+stock))
			assert.Equal(t, s6Actions, rows, "one inventory_change row per change_id")
			want := initial + s6Actions*(s6Actions+1)/2
			assert.Equal(t, want, onHand, "stock = initial + one effect per change")
			assert.Equal(t, initial+sum, onHand, "stock on hand reconciles with inventory_change")
		})
	}
}

// S6: the same race on account_transaction
// (transaction_id, its primary key): balance = Σ amounts, one row per transaction_id.
func TestDedup_CompensationAndMessageOnOneAccountTransactionGiveOneEffect(t *testing.T) {
	db := testenv.MySQL(t)
	for _, order := range s6Orders {
		t.Run(order, func(t *testing.T) {
			txns := tempTable(t, db, "s6_acct_txn", `CREATE TABLE %s (
				transaction_id VARCHAR(128) NOT NULL PRIMARY KEY,
				account_id     VARCHAR(64)  NOT NULL,
				amount_cents   BIGINT       NOT NULL
			) ENGINE=InnoDB`)
			accounts := tempTable(t, db, "s6_account", `CREATE TABLE %s (
				account_id VARCHAR(64) NOT NULL PRIMARY KEY, balance_cents BIGINT NOT NULL) ENGINE=InnoDB`)
			_, err := db.Exec("INSERT INTO " + accounts + " VALUES ('acc-1', 0)")
			require.NoError(t, err)
			actions, err := dedup.NewActions(dedup.ActionTable{Table: txns, KeyColumn: "transaction_id"})
			require.NoError(t, err)
			amount := func(i int) int64 { return int64(100 * (i + 1)) }

			compensationRace(t, db, raceDomain{
				actions: actions,
				columns: func(i int) map[string]any { return map[string]any{"account_id": "acc-1", "amount_cents": amount(i)} },
				effect: func(ctx context.Context, tx *sqlx.Tx, i int) error {
					_, err := tx.ExecContext(ctx, "UPDATE "+accounts+" SET balance_cents = balance_cents + ? WHERE account_id = 'acc-1'", amount(i))
					return err
				},
			}, order)

			var rows int
			var balance, sum int64
			require.NoError(t, db.Get(&rows, "SELECT COUNT(*) FROM "+txns))
			require.NoError(t, db.Get(&sum, "SELECT COALESCE(SUM(amount_cents), 0) FROM "+txns))
			require.NoError(t, db.Get(&balance, "SELECT balance_cents FROM "+accounts))
			assert.Equal(t, s6Actions, rows, "one account_transaction row per transaction_id")
			assert.Equal(t, int64(100*s6Actions*(s6Actions+1)/2), balance, "balance = Σ amounts, each once")
			assert.Equal(t, sum, balance, "SUM(account_transaction) = account.balance")
		})
	}
}
