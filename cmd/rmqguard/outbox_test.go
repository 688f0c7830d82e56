package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/outbox"
)

// F33/F34 through the CLI: `outbox list --status parked` shows a parked row with its reason, `outbox
// retry --all-parked` makes it pending again, and `outbox purge` deletes only sent rows past the window.
func TestOutboxCLI_ListsParkedRowsRetriesThemAndPurgesOnlySentRows(t *testing.T) {
	db := testenv.MySQL(t)
	dsn := testenv.MySQLDSN()
	prefix := "cli" + strings.TrimPrefix(testenv.Unique("x"), "x-") + "_"
	err := dedupsql.CheckPrefix(prefix)
	require.NoError(t, err)
	_, err = outbox.Migrate(context.Background(), db.DB, prefix)
	require.NoError(t, err)
	table := prefix + outboxsql.Table
	t.Cleanup(func() {
		_, _ = db.Exec("DROP TABLE IF EXISTS " + table)
		_, _ = db.Exec("DROP TABLE IF EXISTS " + prefix + outboxsql.VersionTable)
	})
	insert := `INSERT INTO ` + table + ` (kind, event_id, source_event_id, scope, name, sharding_key, topic, body, status,
		attempts, next_attempt_at, last_error, created_at, sent_at)
		VALUES ('message', ?, 'e1', 'g', 'credited', 'k', 'GONE', '', ?, 1, UTC_TIMESTAMP(6), ?, UTC_TIMESTAMP(6), ?)`
	res, err := db.Exec(insert, "g/e1/credited", "parked", "send to GONE: topic does not exist", nil)
	require.NoError(t, err)
	parkedID, _ := res.LastInsertId()
	_, err = db.Exec(insert, "g/e2/credited", "sent", "", "2000-01-01 00:00:00")
	require.NoError(t, err)

	run := func(args ...string) string {
		t.Helper()
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(append(args, "--mysql-dsn", dsn, "--table-prefix", prefix))
		require.NoError(t, root.Execute())
		return out.String()
	}
	out := run("outbox", "list", "--status", "parked")
	require.Contains(t, out, strconv.FormatInt(parkedID, 10))
	require.Contains(t, out, "topic does not exist")
	require.NotContains(t, out, "g/e2", "a sent row is not listed as parked")

	require.Contains(t, run("outbox", "retry", "--all-parked"), "1 parked rows pending again")
	var status string
	require.NoError(t, db.Get(&status, "SELECT status FROM "+table+" WHERE id = ?", parkedID))
	require.Equal(t, outboxsql.StatusPending, status)

	require.Contains(t, run("outbox", "purge", "--older-than", "24h"), "deleted 1 sent rows")
	var left int
	require.NoError(t, db.Get(&left, "SELECT COUNT(*) FROM "+table))
	require.Equal(t, 1, left, "the pending row stays")
}

// An outbox command on a database without the outbox table says how the table is made, not only MySQL's 1146.
func TestOutboxCLI_ListWithoutTheOutboxTableSaysToRunOutboxMigrate(t *testing.T) {
	testenv.MySQL(t)
	prefix := "none" + strings.TrimPrefix(testenv.Unique("x"), "x-") + "_"
	root := newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"outbox", "list", "--mysql-dsn", testenv.MySQLDSN(), "--table-prefix", prefix})
	err := root.Execute()
	require.Error(t, err)
	require.True(t, mysqlerr.MissingTable(err), "the driver's error stays in the chain: %v", err)
	require.Contains(t, err.Error(), "the application creates "+prefix+outboxsql.Table+" with outbox.Migrate")
}
