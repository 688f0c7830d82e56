package testenv

import (
	"context"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"
)

// BalanceTable holds the hot rows of the batch tests (F37): one balance per run and account, which every
// event of the account updates.
const BalanceTable = "test_hot_balance"

const balanceDDL = `CREATE TABLE IF NOT EXISTS ` + BalanceTable + ` (
	run     VARCHAR(64) NOT NULL,
	account VARCHAR(64) NOT NULL,
	balance BIGINT      NOT NULL,
	PRIMARY KEY (run, account)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`

// Balances are the balances of one test run in BalanceTable. Build them with NewBalances.
type Balances struct {
	db  *sqlx.DB
	run string
}

// NewBalances creates BalanceTable if it is missing and returns the balances of run (a unique prefix of
// the test; at most 64 characters). Rows of other runs are never read or changed.
func NewBalances(t testing.TB, db *sqlx.DB, run string) *Balances {
	t.Helper()
	if _, err := db.Exec(balanceDDL); err != nil {
		t.Fatalf("create %s: %v", BalanceTable, err)
	}
	return &Balances{db: db, run: run}
}

// Add adds amount to account's balance through tx, creating it when missing (an upsert: the row lock a
// hot row's writers queue on). Errors are the driver's, wrapped.
func (b *Balances) Add(ctx context.Context, tx *sqlx.Tx, account string, amount int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+BalanceTable+` (run, account, balance) VALUES (?, ?, ?)
		ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance)`, b.run, account, amount); err != nil {
		return fmt.Errorf("balances: add to %s: %w", account, err)
	}
	return nil
}

// All returns the run's balances by account.
func (b *Balances) All(t testing.TB) map[string]int64 {
	t.Helper()
	var rows []struct {
		Account string `db:"account"`
		Balance int64  `db:"balance"`
	}
	if err := b.db.Select(&rows, `SELECT account, balance FROM `+BalanceTable+` WHERE run = ?`, b.run); err != nil {
		t.Fatalf("balances: read: %v", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Account] = r.Balance
	}
	return out
}
