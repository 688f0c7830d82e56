package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
