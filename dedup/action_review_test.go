package dedup_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

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
