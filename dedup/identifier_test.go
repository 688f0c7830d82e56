package dedup_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
)

// Table and column names that are SQL reserved words (order, key, desc, select) work in transitions and
// action records: the helpers quote every identifier. On a database of the test's own, so that a table
// named `order` meets no one else's.
func TestStatesAndActions_ReservedWordsAsNames(t *testing.T) {
	db := scratchDB(t)
	ctx := context.Background()
	_, err := db.Exec("CREATE TABLE `order` (`key` VARCHAR(64) PRIMARY KEY, `desc` VARCHAR(20) NOT NULL, " +
		"`select` BIGINT NOT NULL, `group` VARCHAR(20) NULL) ENGINE=InnoDB")
	require.NoError(t, err)
	_, err = db.Exec("INSERT INTO `order` (`key`, `desc`, `select`) VALUES ('o-1', 'WAIT_PAY', 1)")
	require.NoError(t, err)
	s, err := dedup.NewStates(dedup.StateTable{Table: "order", KeyColumn: "key", StatusColumn: "desc", VersionColumn: "select"})
	require.NoError(t, err)
	_, err = db.Exec("CREATE TABLE `change` (`index` VARCHAR(64) PRIMARY KEY, `int` INT NOT NULL) ENGINE=InnoDB")
	require.NoError(t, err)
	a, err := dedup.NewActions(dedup.ActionTable{Table: "change", KeyColumn: "index"})
	require.NoError(t, err)
	tx, err := db.Beginx() // from here on no require: an open transaction would block the database's DROP
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	r, err := s.Transition(ctx, tx, dedup.Transition{Key: "o-1", From: []string{"WAIT_PAY"}, To: "PAID", Version: 2,
		Set: map[string]any{"group": "g"}})
	assert.NoError(t, err)
	assert.Equal(t, dedup.TransitionApplied, r)
	r, err = s.Transition(ctx, tx, dedup.Transition{Key: "o-1", From: []string{"WAIT_PAY"}, To: "PAID", Version: 2})
	assert.NoError(t, err)
	assert.Equal(t, dedup.TransitionStale, r, "the second move reads the row back")
	v, err := s.LoadVersion(ctx, tx, "o-1")
	assert.NoError(t, err)
	assert.EqualValues(t, 2, v)

	for _, want := range []dedup.ActionResult{dedup.ActionApplied, dedup.ActionAlreadyApplied} {
		r, err := a.Record(ctx, tx, "c-1", map[string]any{"int": 5})
		assert.NoError(t, err)
		assert.Equal(t, want, r)
	}
	assert.NoError(t, tx.Commit())
}
