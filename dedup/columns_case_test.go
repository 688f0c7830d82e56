package dedup_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/retry"
)

// MySQL column names are case-insensitive: "quantity" and "QUANTITY" are one column. Two spellings of one
// column in Record's columns (an INSERT then fails with 1110, retried until the DLQ) or in a transition's
// Set (an UPDATE silently keeps one of the two values) are programming errors: permanent, before any SQL.
func TestActions_ColumnNamedTwiceInAnotherCaseIsPermanent(t *testing.T) {
	a, err := dedup.NewActions(dedup.ActionTable{Table: "inventory_change", KeyColumn: "change_id"})
	require.NoError(t, err)
	_, err = a.Record(context.Background(), nil, "c-1", map[string]any{"quantity": -1, "QUANTITY": -2})
	require.Error(t, err)
	assert.True(t, retry.Classify(err) == retry.ClassPermanent, "%v", err)
	assert.Contains(t, err.Error(), "twice")
}

func TestStates_SetColumnNamedTwiceInAnotherCaseIsPermanent(t *testing.T) {
	s, err := dedup.NewStates(dedup.StateTable{Table: "orders", KeyColumn: "order_no"})
	require.NoError(t, err)
	_, err = s.Transition(context.Background(), nil, dedup.Transition{Key: "o-1", From: []string{"WAIT_PAY"}, To: "PAID",
		Version: 2, Set: map[string]any{"paid_at": 1, "Paid_At": 2}})
	require.Error(t, err)
	assert.True(t, retry.Classify(err) == retry.ClassPermanent, "%v", err)
	assert.Contains(t, err.Error(), "twice")
}

// S6: MySQL index names are case-insensitive, so KeyName "uk_change_id" names the key declared as
// UK_Change_ID (1062 reports the declared spelling). A second record of the action is "already applied",
// not an error that retries the message into the DLQ.
func TestActions_KeyNameIsMatchedWithoutCase(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	table := tempTable(t, db, "tx_inv", `CREATE TABLE %s (
		id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		change_id VARCHAR(128) NOT NULL,
		quantity  INT NOT NULL,
		UNIQUE KEY UK_Change_ID (change_id)) ENGINE=InnoDB`)
	a, err := dedup.NewActions(dedup.ActionTable{Table: table, KeyColumn: "change_id", KeyName: "uk_change_id"})
	require.NoError(t, err)
	var got []dedup.ActionResult
	for range 2 {
		tx, err := db.Beginx()
		require.NoError(t, err)
		r, err := a.Record(ctx, tx, "c-1", map[string]any{"quantity": -1})
		if !assert.NoError(t, err) {
			_ = tx.Rollback() // an open transaction would hold the table's metadata lock against its DROP
			return
		}
		require.NoError(t, tx.Commit())
		got = append(got, r)
	}
	assert.Equal(t, []dedup.ActionResult{dedup.ActionApplied, dedup.ActionAlreadyApplied}, got)
}
