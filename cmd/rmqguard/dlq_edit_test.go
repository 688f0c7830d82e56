package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// Usage errors of `dlq edit` exit 2 and name the flag, before anything is read or sent.
func TestDLQEdit_UsageErrorsExit2(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no id":        {[]string{"--group", "cg", "--body", "{}"}, "--id is required"},
		"no body":      {[]string{"--group", "cg", "--id", "S"}, "exactly one of --body-file F, --body TEXT or --body -"},
		"two bodies":   {[]string{"--group", "cg", "--id", "S", "--body", "{}", "--body-file", "f"}, "exactly one of"},
		"missing file": {[]string{"--group", "cg", "--id", "S", "--body-file", "/no/such/file"}, "--body-file: open /no/such/file"},
		"group topic":  {[]string{"--group", "%DLQ%cg", "--id", "S", "--body", "{}"}, "not its topic"},
		"target retry": {[]string{"--group", "cg", "--id", "S", "--body", "{}", "--target-topic", "%RETRY%cg"}, "must never see"},
	} {
		t.Run(name, func(t *testing.T) {
			root := newRootCmd()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(append([]string{"dlq", "edit", "--namesrv", "127.0.0.1:1", "--mysql-dsn", "u:p@tcp(127.0.0.1:1)/db"}, tc.args...))
			err := root.Execute()
			assert.ErrorContains(t, err, tc.want)
			assert.Equal(t, exitUsage, exitCode(err), "exit code of %v", err)
		})
	}
}

// `dlq edit` end to end on the real broker and MariaDB: the dry run prints the bodies' difference and what
// would be sent and records nothing; without --yes and a terminal it is refused; with --yes the edited copy
// is sent and the audit keeps both bodies and the editor. The letter is then SUPERSEDED: `dlq replay` sends
// nothing and says so (exit 0), `dlq list` and `dlq show` say so (show with the edited body), and a second
// edit is refused with what to do instead (exit 1).
func TestCLI_DLQEdit_DryRunThenSendThenTheLetterIsSuperseded(t *testing.T) {
	w := newCLIDLQ(t, 6)
	bad := []byte(`{"orderNo":"o-1","sku":"no-such-sku","quantity":2}`)
	m := w.publish("e-edit", "OrderCreated", "unknown SKU", bad, nil)
	other := w.publish("e-other", "OrderCreated", "unknown SKU", []byte(`{"orderNo":"o-2"}`), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, rmq.EnsureTopic(ctx, []string{w.ns}, w.broker, rmq.RetryTopic(w.group), 1))
	db := testenv.MySQL(t)
	dsn := testenv.MySQLDSN()
	fixed := filepath.Join(t.TempDir(), "fixed.json")
	require.NoError(t, os.WriteFile(fixed, []byte(`{"orderNo":"o-1","sku":"sku-42","quantity":2}`), 0o600))
	edit := func(args ...string) (string, string, int) {
		return w.rmqguard("edit", append([]string{"--mysql-dsn", dsn, "--id", m.OffsetMsgID, "--body-file", fixed, "--operator", "alice"}, args...)...)
	}
	auditRows := func() int {
		var n int
		require.NoError(t, db.Get(&n, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`, dlqtool.AuditTable))
		if n == 0 {
			return 0
		}
		require.NoError(t, db.Get(&n, `SELECT COUNT(*) FROM `+dlqtool.AuditTable+` WHERE consumer_group = ?`, w.group))
		return n
	}

	out, errOut, code := edit("--dry-run")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.Contains(t, out, "letter "+m.OffsetMsgID+" of %DLQ%"+w.group)
	assert.Contains(t, out, "--- letter body (50 bytes)\n+++ edited body (45 bytes)   [JSON, pretty-printed]\n")
	assert.Contains(t, out, "    \"orderNo\": \"o-1\",\n-   \"sku\": \"no-such-sku\",\n+   \"sku\": \"sku-42\",\n    \"quantity\": 2\n",
		"the changed line, between unchanged ones")
	assert.Contains(t, out, "would send 45 bytes to %RETRY%"+w.group+", presented on topic ORDER, with EVENT_ID e-edit")
	assert.Contains(t, out, "(dry run: nothing sent or recorded)")
	assert.Zero(t, auditRows(), "a dry run records nothing")

	_, errOut, code = edit()
	assert.Equal(t, exitUsage, code, "no terminal, no --yes")
	assert.Contains(t, errOut, "pass --yes")

	out, errOut, code = edit("--yes")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.Regexp(t, `sent 45 bytes to %RETRY%`+w.group+` as \S+, presented on topic ORDER, with EVENT_ID e-edit; letter `+m.OffsetMsgID+` is superseded`, out)
	audit, err := dlqtool.NewMySQLAudit(db)
	require.NoError(t, err)
	row, found, err := audit.Lookup(ctx, w.group, m.OffsetMsgID)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, dlqtool.AuditSent, row.Status)
	assert.Equal(t, "alice", row.EditedBy)
	assert.Equal(t, bad, row.OriginalBody)
	assert.Equal(t, `{"orderNo":"o-1","sku":"sku-42","quantity":2}`, string(row.EditedBody))
	assert.Equal(t, "e-edit", row.EventID)

	out, errOut, code = w.rmqguard("replay", "--mysql-dsn", dsn, "--yes", "--key", "e-edit")
	require.Equal(t, 0, code, "a superseded letter needs no replay: %s%s", out, errOut)
	assert.Contains(t, out, "selected 1, sent 0, would send 0, skipped: already replayed 0, uncertain 0, already processed 0, no origin 0, superseded by an edit 1; failed 0")
	assert.Regexp(t, `skipped-superseded +dlq=`+m.OffsetMsgID+` .*superseded by an edited copy \(edited by alice at \S+, replay \S+, sent as `+row.SentMsgID+`\): the letter is never replayed as it is`, out)
	after, _, err := audit.Lookup(ctx, w.group, m.OffsetMsgID)
	require.NoError(t, err)
	assert.Equal(t, row.ReplayID, after.ReplayID, "the replay claimed nothing")

	out, errOut, code = w.rmqguard("list", "--mysql-dsn", dsn)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, m.MsgID+`\s.*\sSUPERSEDED edited 20\S+Z by alice\s+no\n`, out)
	assert.Regexp(t, other.MsgID+`\s.*\s-\s+no\n`, out)
	out, errOut, code = w.rmqguard("list", "--mysql-dsn", dsn, "-o", "json", "--key", "e-edit")
	require.Equal(t, 0, code, errOut)
	var rows []listRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 1)
	assert.Equal(t, []string{"superseded", "sent", "alice"}, []string{rows[0].ReplayStatus, rows[0].EditedCopy, rows[0].ReplayedBy})

	out, errOut, code = w.rmqguard("show", "--mysql-dsn", dsn, m.OffsetMsgID)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `\nreplay: +SUPERSEDED: edited by alice at 20\S+ and replayed \(run \S+\): sent as `+row.SentMsgID+`\n`, out)
	assert.Contains(t, out, "edited body (45 bytes, JSON):\n  {\n    \"orderNo\": \"o-1\",\n    \"sku\": \"sku-42\",")
	out, errOut, code = w.rmqguard("show", "--mysql-dsn", dsn, other.OffsetMsgID)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `\nreplay: +- \(never replayed\)\n`, out)

	out, errOut, code = edit("--yes", "--force")
	assert.Equal(t, 1, code, "%s%s", out, errOut)
	assert.Contains(t, out, "skipped-superseded dlq="+m.OffsetMsgID)
	assert.Contains(t, out, "it is not edited twice; if the edited copy failed too, it is a new letter in the DLQ (RMQGUARD_REPLAY_OF="+m.OffsetMsgID+"): edit or replay that one")
}

// The edited body may come from stdin (--body -) or the command line; the letter may be named by its DLQ
// message ID as `dlq list` prints it. An unknown ID is a failure (exit 1).
func TestCLI_DLQEdit_BodyFromStdinAndLetterByMessageID(t *testing.T) {
	w := newCLIDLQ(t, 6)
	m := w.publish("e-stdin", "OrderCreated", "bad", []byte("plain text body"), nil)
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader("fixed text body\n"))
	root.SetArgs([]string{"--namesrv", w.ns, "dlq", "edit", "--group", w.group, "--mysql-dsn", testenv.MySQLDSN(),
		"--id", m.MsgID, "--body", "-", "--dry-run"})
	require.NoError(t, root.Execute(), errOut.String())
	assert.Contains(t, out.String(), "--- letter body (15 bytes)\n+++ edited body (16 bytes)   [text]\n- plain text body\n+ fixed text body\n")
	assert.Contains(t, out.String(), "would send 16 bytes")

	_, errText, code := w.rmqguard("edit", "--mysql-dsn", testenv.MySQLDSN(), "--id", m.MsgID, "--body", "plain text body", "--dry-run")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errText, "replay the letter instead")
	_, errText, code = w.rmqguard("edit", "--mysql-dsn", testenv.MySQLDSN(), "--id", "NO-SUCH-ID", "--body", "x", "--dry-run")
	assert.Equal(t, 1, code)
	assert.Contains(t, errText, "no letter whose store ID or message ID is NO-SUCH-ID")
}
