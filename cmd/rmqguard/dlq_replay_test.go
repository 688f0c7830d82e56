package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// Usage errors of `dlq replay` exit 2 and name the flag, before anything is read or sent.
func TestDLQReplay_UsageErrorsExit2(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no group":           {[]string{}, "--group is required"},
		"group is a topic":   {[]string{"--group", "%DLQ%cg"}, "not its topic"},
		"no database":        {[]string{"--group", "cg", "--mysql-dsn", ""}, "pass --mysql-dsn"},
		"rate":               {[]string{"--group", "cg", "--rate", "0"}, "--rate 0"},
		"target is retry":    {[]string{"--group", "cg", "--target-topic", "%RETRY%cg"}, "must never see"},
		"since":              {[]string{"--group", "cg", "--since", "yesterday"}, "--since: \"yesterday\" is neither an RFC 3339 time nor a duration"},
		"file with a filter": {[]string{"--group", "cg", "--from-file", "x.jsonl", "--key", "k"}, "filters, --limit and --fix-perm apply to DLQ scans only"},
		"unknown flag":       {[]string{"--group", "cg", "--bogus"}, "unknown flag"},
		"table prefix":       {[]string{"--group", "cg", "--table-prefix", "Bad-"}, "--table-prefix: dedup: not a plain SQL identifier"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(envMySQLDSN, "")
			root := newRootCmd()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			args := []string{"dlq", "replay", "--namesrv", "127.0.0.1:1"}
			if name != "no database" {
				args = append(args, "--mysql-dsn", "u:p@tcp(127.0.0.1:1)/db")
			}
			root.SetArgs(append(args, tc.args...))
			err := root.Execute()
			assert.ErrorContains(t, err, tc.want)
			assert.Equal(t, exitUsage, exitCode(err), "exit code of %v", err)
		})
	}
}

// F17 through `dlq replay`: a write-only DLQ stops the replay with an error naming perm 2 and --fix-perm
// (exit 1, never "nothing to replay"); with --fix-perm it is made readable, said so, and its letter decided.
func TestF17_CLI_ReplayWriteOnlyDLQ(t *testing.T) {
	w := newCLIDLQ(t, 2)
	w.publish("e-wo", "OrderCreated", "invalid JSON", []byte(`{}`), nil)
	testenv.MySQL(t)
	dsn := testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN)

	out, errOut, code := w.rmqguard("replay", "--mysql-dsn", dsn, "--yes")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "perm 2")
	assert.Contains(t, errOut, "--fix-perm")
	assert.NotContains(t, out, "selected", "no replay summary for a DLQ that could not be read")

	out, errOut, code = w.rmqguard("replay", "--mysql-dsn", dsn, "--dry-run", "--fix-perm")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "%DLQ%"+w.group+" was write-only (perm 2); made readable (perm 6), 1 read / 1 write queues kept")
	assert.Contains(t, out, "selected 1, sent 0, would send 1,")
}

// Through `dlq replay`: with --table-prefix the already-processed check reads the prefixed
// dedup table (a letter whose event has a row there is skipped), without it processed_event.
func TestCLI_ReplayChecksThePrefixedDedupTable(t *testing.T) {
	w := newCLIDLQ(t, 6)
	w.publish("e-1", "OrderCreated", "invalid JSON", []byte(`{}`), nil)
	w.publish("e-2", "OrderCreated", "invalid JSON", []byte(`{}`), nil)
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
	_, err = db.Exec(`INSERT INTO `+prefix+dedupsql.ProcessedTable+` (consumer_group, event_id, topic, msg_id, consumed_at, result_status)
		VALUES (?, 'e-1', 'ORDER', 'm', UTC_TIMESTAMP(6), 'SUCCESS')`, w.group)
	require.NoError(t, err)

	out, errOut, code := w.rmqguard("replay", "--mysql-dsn", dsn, "--dry-run", "--table-prefix", prefix)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "selected 2, sent 0, would send 1, skipped: already replayed 0, uncertain 0, already processed 1,")
	out, errOut, code = w.rmqguard("replay", "--mysql-dsn", dsn, "--dry-run")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "selected 2, sent 0, would send 2, skipped: already replayed 0, uncertain 0, already processed 0,")
}
