package dedup_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// tempTable creates a table of this test only (ddl has one %s for its name) in the test database and
// drops it when the test ends. Shared tables are never touched.
func tempTable(t testing.TB, db *sqlx.DB, prefix, ddl string) string {
	t.Helper()
	name := strings.ReplaceAll(testenv.Unique(prefix), "-", "_")
	_, err := db.Exec(fmt.Sprintf(ddl, name))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + name) })
	return name
}

// orderStates is a fresh orders-like table holding order o-1 in WAIT_PAY at version 1.
func orderStates(t testing.TB, db *sqlx.DB) (*dedup.States, string) {
	t.Helper()
	table := tempTable(t, db, "tx_orders", `CREATE TABLE %s (
		order_no VARCHAR(64) NOT NULL PRIMARY KEY,
		state    VARCHAR(20) NOT NULL,
		version  BIGINT      NOT NULL,
		paid_at  DATETIME(6) NULL,
		paid_by  VARCHAR(64) NULL
	) ENGINE=InnoDB`)
	_, err := db.Exec("INSERT INTO " + table + " (order_no, state, version) VALUES ('o-1', 'WAIT_PAY', 1)")
	require.NoError(t, err)
	s, err := dedup.NewStates(dedup.StateTable{Table: table, KeyColumn: "order_no", StatusColumn: "state"})
	require.NoError(t, err)
	return s, table
}

// transition runs tr in a transaction of its own and commits it.
func transition(t testing.TB, db *sqlx.DB, s *dedup.States, tr dedup.Transition) (dedup.TransitionResult, error) {
	t.Helper()
	tx, err := db.Beginx()
	require.NoError(t, err)
	r, err := s.Transition(context.Background(), tx, tr)
	require.NoError(t, tx.Commit())
	return r, err
}

type orderRow struct {
	State   string  `db:"state"`
	Version int64   `db:"version"`
	PaidBy  *string `db:"paid_by"`
}

func readOrder(t testing.TB, db *sqlx.DB, table string) orderRow {
	t.Helper()
	var r orderRow
	require.NoError(t, db.Get(&r, "SELECT state, version, paid_by FROM "+table+" WHERE order_no = 'o-1'"))
	return r
}

func TestStates_TransitionResultsOnMariaDB(t *testing.T) {
	db := testenv.MySQL(t)
	pay := dedup.Transition{Key: "o-1", From: []string{"WAIT_PAY"}, To: "PAID", Version: 2}

	t.Run("applied", func(t *testing.T) {
		s, table := orderStates(t, db)
		r, err := transition(t, db, s, pay)
		require.NoError(t, err)
		assert.Equal(t, dedup.TransitionApplied, r)
		assert.Equal(t, orderRow{State: "PAID", Version: 2}, readOrder(t, db, table))
	})
	t.Run("stale: the same event again, and an older one", func(t *testing.T) {
		s, table := orderStates(t, db)
		_, err := transition(t, db, s, pay)
		require.NoError(t, err)
		for _, tr := range []dedup.Transition{pay, {Key: "o-1", From: []string{"WAIT_PAY"}, To: "CANCELLED", Version: 1}} {
			r, err := transition(t, db, s, tr)
			require.NoError(t, err)
			assert.Equal(t, dedup.TransitionStale, r, "v%d", tr.Version)
		}
		assert.Equal(t, orderRow{State: "PAID", Version: 2}, readOrder(t, db, table), "a stale event writes nothing")
	})
	t.Run("illegal", func(t *testing.T) {
		s, table := orderStates(t, db)
		r, err := transition(t, db, s, dedup.Transition{Key: "o-1", From: []string{"PAID", "SHIPPED"}, To: "DELIVERED", Version: 2})
		require.NoError(t, err)
		assert.Equal(t, dedup.TransitionIllegal, r)
		assert.Equal(t, orderRow{State: "WAIT_PAY", Version: 1}, readOrder(t, db, table))
	})
	t.Run("ahead", func(t *testing.T) {
		s, table := orderStates(t, db)
		r, err := transition(t, db, s, dedup.Transition{Key: "o-1", From: []string{"PAID"}, To: "SHIPPED", Version: 3})
		require.NoError(t, err)
		assert.Equal(t, dedup.TransitionAhead, r)
		assert.Equal(t, orderRow{State: "WAIT_PAY", Version: 1}, readOrder(t, db, table))
	})
	t.Run("missing", func(t *testing.T) {
		s, _ := orderStates(t, db)
		r, err := transition(t, db, s, dedup.Transition{Key: "o-404", From: []string{"WAIT_PAY"}, To: "PAID", Version: 2})
		require.NoError(t, err)
		assert.Equal(t, dedup.TransitionMissing, r)
	})
	t.Run("from one of several statuses, with Set columns", func(t *testing.T) {
		s, table := orderStates(t, db)
		paidAt := time.Date(2026, 12, 1, 2, 3, 4, 0, time.UTC)
		r, err := transition(t, db, s, dedup.Transition{Key: "o-1", From: []string{"CREATED", "WAIT_PAY"}, To: "PAID", Version: 2,
			Set: map[string]any{"paid_by": "card", "paid_at": paidAt}})
		require.NoError(t, err)
		assert.Equal(t, dedup.TransitionApplied, r)
		by := "card"
		assert.Equal(t, orderRow{State: "PAID", Version: 2, PaidBy: &by}, readOrder(t, db, table))
		var at time.Time
		require.NoError(t, db.Get(&at, "SELECT paid_at FROM "+table+" WHERE order_no = 'o-1'"))
		assert.True(t, paidAt.Equal(at), "paid_at %v", at)
	})
	t.Run("a database error is wrapped with table and key", func(t *testing.T) {
		s, table := orderStates(t, db)
		_, err := transition(t, db, s, dedup.Transition{Key: "o-1", From: []string{"WAIT_PAY"}, To: "PAID", Version: 2,
			Set: map[string]any{"no_such_column": 1}})
		var my *mysql.MySQLError
		require.ErrorAs(t, err, &my)
		assert.Equal(t, uint16(1054), my.Number)
		assert.Contains(t, err.Error(), table)
		assert.Contains(t, err.Error(), "o-1")
		assert.Equal(t, orderRow{State: "WAIT_PAY", Version: 1}, readOrder(t, db, table))
	})
}

// TestStates_AppliedWithClientFoundRows: with clientFoundRows=true the driver counts matched rows, not
// changed ones; the results must be the same.
func TestStates_AppliedWithClientFoundRows(t *testing.T) {
	base := testenv.MySQL(t)
	cfg, err := mysql.ParseDSN(testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN))
	require.NoError(t, err)
	cfg.ClientFoundRows = true
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	s, table := orderStates(t, base)
	pay := dedup.Transition{Key: "o-1", From: []string{"WAIT_PAY", "PAID"}, To: "PAID", Version: 2}

	r, err := transition(t, db, s, pay)
	require.NoError(t, err)
	assert.Equal(t, dedup.TransitionApplied, r)
	r, err = transition(t, db, s, pay)
	require.NoError(t, err)
	assert.Equal(t, dedup.TransitionStale, r)
	assert.Equal(t, orderRow{State: "PAID", Version: 2}, readOrder(t, db, table))
}

// inventoryActions is a fresh inventory_change-like table: an id primary key, change_id under its own
// unique key uk_change_id, and a second unique key uk_ref on ref.
func inventoryActions(t testing.TB, db *sqlx.DB) (*dedup.Actions, string) {
	t.Helper()
	table := tempTable(t, db, "tx_inv", `CREATE TABLE %s (
		id        BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
		change_id VARCHAR(128) NOT NULL,
		sku_id    VARCHAR(64)  NOT NULL,
		quantity  INT          NOT NULL,
		ref       VARCHAR(64)  NULL,
		UNIQUE KEY uk_change_id (change_id),
		UNIQUE KEY uk_ref (ref)
	) ENGINE=InnoDB`)
	a, err := dedup.NewActions(dedup.ActionTable{Table: table, KeyColumn: "change_id", KeyName: "uk_change_id"})
	require.NoError(t, err)
	return a, table
}

func TestActions_RecordOnMariaDB(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()

	t.Run("applied, then already applied; the transaction stays usable", func(t *testing.T) {
		a, table := inventoryActions(t, db)
		cols := map[string]any{"sku_id": "sku-1", "quantity": -2}
		tx, err := db.Beginx()
		require.NoError(t, err)
		r, err := a.Record(ctx, tx, "c-1", cols)
		require.NoError(t, err)
		assert.Equal(t, dedup.ActionApplied, r)
		r, err = a.Record(ctx, tx, "c-1", cols)
		require.NoError(t, err)
		assert.Equal(t, dedup.ActionAlreadyApplied, r)
		// The 1062 rolled back its statement only: the first row is still there and the commit keeps it.
		r, err = a.Record(ctx, tx, "c-2", cols)
		require.NoError(t, err)
		assert.Equal(t, dedup.ActionApplied, r)
		require.NoError(t, tx.Commit())
		var n int
		require.NoError(t, db.Get(&n, "SELECT COUNT(*) FROM "+table))
		assert.Equal(t, 2, n)
	})
	t.Run("a 1062 on another unique key is an error, not already applied", func(t *testing.T) {
		a, table := inventoryActions(t, db)
		tx, err := db.Beginx()
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		_, err = a.Record(ctx, tx, "c-1", map[string]any{"sku_id": "s", "quantity": 1, "ref": "r-1"})
		require.NoError(t, err)
		r, err := a.Record(ctx, tx, "c-2", map[string]any{"sku_id": "s", "quantity": 1, "ref": "r-1"})
		assert.Zero(t, r)
		require.Error(t, err)
		key, dup := mysqlerr.DuplicateKey(err)
		assert.True(t, dup, "the driver's 1062 is wrapped: %v", err)
		assert.Equal(t, "uk_ref", key)
		assert.Contains(t, err.Error(), table)
		assert.Contains(t, err.Error(), `"c-2"`)
	})
	t.Run("the primary key as action key (the default KeyName)", func(t *testing.T) {
		table := tempTable(t, db, "tx_acct", `CREATE TABLE %s (
			transaction_id VARCHAR(128) NOT NULL PRIMARY KEY, amount BIGINT NOT NULL) ENGINE=InnoDB`)
		a, err := dedup.NewActions(dedup.ActionTable{Table: table, KeyColumn: "transaction_id"})
		require.NoError(t, err)
		var got []dedup.ActionResult
		for range 2 {
			tx, err := db.Beginx()
			require.NoError(t, err)
			r, err := a.Record(ctx, tx, "t-1", map[string]any{"amount": 500})
			require.NoError(t, err)
			require.NoError(t, tx.Commit())
			got = append(got, r)
		}
		assert.Equal(t, []dedup.ActionResult{dedup.ActionApplied, dedup.ActionAlreadyApplied}, got)
	})
}

// TestActions_ConcurrentRecordWaitsForTheFirst: the second insert of one action ID waits on the first
// transaction's lock; the first's commit makes it "already applied", its rollback lets it apply.
func TestActions_ConcurrentRecordWaitsForTheFirst(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	for name, c := range map[string]struct {
		firstCommits bool
		want         dedup.ActionResult
	}{
		"first commits":    {true, dedup.ActionAlreadyApplied},
		"first rolls back": {false, dedup.ActionApplied},
	} {
		t.Run(name, func(t *testing.T) {
			a, table := inventoryActions(t, db)
			cols := map[string]any{"sku_id": "s", "quantity": 1}
			first, err := db.Beginx()
			require.NoError(t, err)
			// Registered after tempTable's DROP, so it runs first: an open transaction would block the DROP.
			t.Cleanup(func() { _ = first.Rollback() })
			r, err := a.Record(ctx, first, "c-1", cols)
			require.NoError(t, err)
			require.Equal(t, dedup.ActionApplied, r)

			type result struct {
				r   dedup.ActionResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				tx, err := db.Beginx()
				if err != nil {
					done <- result{err: err}
					return
				}
				r, err := a.Record(ctx, tx, "c-1", cols)
				if err == nil {
					err = tx.Commit()
				} else {
					_ = tx.Rollback()
				}
				done <- result{r, err}
			}()
			// The second insert must be running on the server and not finished: blocked on the first
			// transaction's lock. (The processlist shows the test user's own threads without PROCESS.)
			require.Eventually(t, func() bool {
				var running int
				_ = db.Get(&running, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
					WHERE COMMAND IN ('Query', 'Execute') AND INFO LIKE ?`, "INSERT INTO `"+table+"`%")
				return running == 1
			}, 10*time.Second, 10*time.Millisecond, "the second Record is not waiting on the server")
			select {
			case got := <-done:
				t.Fatalf("the second Record finished before the first transaction ended: %v %v", got.r, got.err)
			case <-time.After(200 * time.Millisecond):
			}
			if c.firstCommits {
				require.NoError(t, first.Commit())
			} else {
				require.NoError(t, first.Rollback())
			}
			got := <-done
			require.NoError(t, got.err)
			assert.Equal(t, c.want, got.r)
			var n int
			require.NoError(t, db.Get(&n, "SELECT COUNT(*) FROM "+table+" WHERE change_id = 'c-1'"))
			assert.Equal(t, 1, n)
		})
	}
}
