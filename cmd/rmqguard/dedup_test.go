package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// F22 through the CLI: a short window is refused with the reason, a dry run counts, a purge deletes the
// old rows of the group and prints rows, batches and rows/s.
func TestF22_CLI_DedupPurge(t *testing.T) {
	db := testenv.MySQL(t)
	dsn := testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN)
	group := testenv.Unique("cli-purge")
	t.Cleanup(func() { _, _ = db.Exec(`DELETE FROM processed_event WHERE consumer_group = ?`, group) })
	_, err := db.Exec(`INSERT INTO processed_event (consumer_group, event_id, topic, msg_id, consumed_at, result_status)
		SELECT ?, CONCAT('e-', seq), 'T', 'm', UTC_TIMESTAMP(6) - INTERVAL (200 + seq) HOUR, 'SUCCESS' FROM seq_1_to_5`, group)
	require.NoError(t, err)
	run := func(args ...string) (string, error) {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append([]string{"dedup", "purge", "--mysql-dsn", dsn, "--group", group}, args...))
		err := root.Execute()
		return out.String(), err
	}

	_, err = run("--older-than", "100h")
	require.ErrorIs(t, err, dedupsql.ErrWindowTooShort)
	out, err := run("--older-than", "203h", "--batch", "2", "--dry-run")
	require.NoError(t, err)
	assert.Contains(t, out, fmt.Sprintf("dedup purge group=%s: would delete 3 rows in 2 batches of at most 2", group))
	out, err = run("--older-than", "203h", "--batch", "2")
	require.NoError(t, err)
	assert.Contains(t, out, "deleted 3 rows in 2 batches of at most 2")
	assert.Contains(t, out, "rows/s")
	var left int
	require.NoError(t, db.Get(&left, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ?`, group))
	assert.Equal(t, 2, left, "the two rows younger than 203 h stay")
}

// Through the CLI: --table-prefix purges the prefixed table (and names it), leaving
// processed_event alone; an invalid prefix is refused naming the flag, before connecting.
func TestCLI_DedupPurgeWithTablePrefixPurgesThePrefixedTable(t *testing.T) {
	db := testenv.MySQL(t)
	dsn := testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN)
	prefix := strings.ReplaceAll(testenv.Unique("cli"), "-", "_") + "_"
	err := dedupsql.CheckPrefix(prefix)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, table := range dedupsql.Names(prefix) {
			_, _ = db.Exec(`DROP TABLE IF EXISTS ` + table) // this test's own tables
		}
	})
	_, err = dedup.Migrate(t.Context(), db.DB, dedup.WithTablePrefix(prefix))
	require.NoError(t, err)
	group := testenv.Unique("cli-purge-prefix")
	t.Cleanup(func() { _, _ = db.Exec(`DELETE FROM processed_event WHERE consumer_group = ?`, group) })
	for _, table := range []string{prefix + dedupsql.ProcessedTable, "processed_event"} {
		_, err = db.Exec(`INSERT INTO `+table+` (consumer_group, event_id, topic, msg_id, consumed_at, result_status)
			SELECT ?, CONCAT('e-', seq), 'T', 'm', UTC_TIMESTAMP(6) - INTERVAL (200 + seq) HOUR, 'SUCCESS' FROM seq_1_to_3`, group)
		require.NoError(t, err)
	}
	run := func(args ...string) (string, error) {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append([]string{"dedup", "purge", "--mysql-dsn", dsn, "--group", group, "--older-than", "170h"}, args...))
		err := root.Execute()
		return out.String(), err
	}

	_, err = run("--table-prefix", "Bad-")
	require.ErrorIs(t, err, dedupsql.ErrInvalidIdentifier)
	assert.Contains(t, err.Error(), "--table-prefix: ")
	out, err := run("--table-prefix", prefix)
	require.NoError(t, err)
	assert.Contains(t, out, fmt.Sprintf("dedup purge table=%sprocessed_event group=%s: deleted 3 rows", prefix, group))
	var left, other int
	require.NoError(t, db.Get(&left, `SELECT COUNT(*) FROM `+prefix+dedupsql.ProcessedTable+` WHERE consumer_group = ?`, group))
	require.NoError(t, db.Get(&other, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ?`, group))
	assert.Equal(t, 0, left)
	assert.Equal(t, 3, other, "processed_event is another schema's table")
}
