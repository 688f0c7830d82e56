package shop

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/dedup"
)

// Seed is the stock and the accounts a demo run starts from.
type Seed struct {
	// Run names the run; the seed's action keys are StockChangeID(Run, sku) and OpenTransactionID(Run, account).
	Run string
	// Stock is the units delivered per SKU, each > 0.
	Stock map[string]int64
	// Accounts is the opening deposit in cents per account ID, each > 0.
	Accounts map[string]int64
}

// Apply records the seed in one transaction of its own: per SKU an inventory_change (kind of a delivery,
// +units) and on_hand += units; per account an account_transaction of kind OPENING and the account's
// balance (the row created when absent). Every row is a business action, so applying a seed twice changes
// nothing the second time. Errors name the SKU or account.
func (s *Shop) Apply(ctx context.Context, db *sqlx.DB, seed Seed) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("shop: seed %s: begin: %w", seed.Run, err)
	}
	defer func() { _ = tx.Rollback() }()
	now := time.Now().UTC()
	for _, sku := range sortedKeys(seed.Stock) {
		if err := s.deliver(ctx, tx, seed.Run, sku, seed.Stock[sku], now); err != nil {
			return err
		}
	}
	for _, acct := range sortedKeys(seed.Accounts) {
		if err := s.open(ctx, tx, seed.Run, acct, seed.Accounts[acct], now); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("shop: seed %s: commit: %w", seed.Run, err)
	}
	return nil
}

// deliver records a stock delivery of units for sku.
func (s *Shop) deliver(ctx context.Context, tx *sqlx.Tx, run, sku string, units int64, now time.Time) error {
	if units <= 0 {
		return fmt.Errorf("shop: seed %s: stock of %s must be > 0, got %d", run, sku, units)
	}
	res, err := s.changes.Record(ctx, tx, StockChangeID(run, sku), map[string]any{
		"sku_id": sku, "order_no": "", "quantity": units, "created_at": now})
	if err != nil {
		return fmt.Errorf("shop: seed stock of %s: %w", sku, err)
	}
	if res != dedup.ActionApplied {
		return nil
	}
	return adjustStock(ctx, tx, sku, units, now)
}

// open records the opening deposit of account.
func (s *Shop) open(ctx context.Context, tx *sqlx.Tx, run, account string, cents int64, now time.Time) error {
	if cents <= 0 {
		return fmt.Errorf("shop: seed %s: opening deposit of %s must be > 0, got %d", run, account, cents)
	}
	res, err := s.transactions.Record(ctx, tx, OpenTransactionID(run, account), map[string]any{
		"account_id": account, "order_no": "", "amount": cents, "kind": KindOpening, "event_id": "", "created_at": now})
	if err != nil {
		return fmt.Errorf("shop: seed account %s: %w", account, err)
	}
	if res != dedup.ActionApplied {
		return nil
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO account (account_id, balance, updated_at) VALUES (?, ?, ?)
		 ON DUPLICATE KEY UPDATE balance = balance + VALUES(balance), updated_at = VALUES(updated_at)`,
		account, cents, now); err != nil {
		return fmt.Errorf("shop: seed account %s: balance: %w", account, err)
	}
	return nil
}

// sortedKeys returns m's keys in order, so that seeds lock their rows in one order.
func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
