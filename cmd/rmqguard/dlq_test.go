package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/topics"
)

// cliDLQ is a unique group on the shared broker whose %DLQ% topic the test creates (perm as given).
type cliDLQ struct {
	t      *testing.T
	ns     string
	broker string
	group  string
}

func newCLIDLQ(t *testing.T, perm int) *cliDLQ {
	t.Helper()
	w := &cliDLQ{t: t, ns: testenv.NameServer(t), broker: testenv.Broker(t), group: testenv.Unique("cli-dlq")}
	testenv.MySQL(t) // the schema `dlq list` reads for the replay status (RMQGUARD_MYSQL_DSN, see TestMain)
	if perm == 0 {
		return w
	}
	topic := rmq.DLQTopic(w.group)
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{w.ns})))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = adm.DeleteTopic(context.Background(), admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(w.broker),
			admin.WithNameSrvAddr([]string{w.ns}))
		_ = adm.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(w.broker),
		admin.WithReadQueueNums(1), admin.WithWriteQueueNums(1), admin.WithPerm(perm)))
	require.Eventually(t, func() bool {
		r, err := rmq.TopicRoute(ctx, []string{w.ns}, topic)
		return err == nil && len(r) == 1 && r[0].Perm == perm
	}, 10*time.Second, 100*time.Millisecond)
	return w
}

// publish sends a dead letter of a delivery from ORDER as rmqguard's publisher builds it; returns the send result.
func (w *cliDLQ) publish(eventID, eventType, reason string, body []byte, props map[string]string) *primitive.SendResult {
	w.t.Helper()
	p, err := rmq.StartProducer([]string{w.ns}, testenv.Unique("cli-dlq-prod"))
	require.NoError(w.t, err)
	defer func() { _ = p.Shutdown() }()
	orig := &primitive.MessageExt{MsgId: testenv.Unique("MSG"), ReconsumeTimes: 2,
		Message: primitive.Message{Topic: rmq.RetryTopic(w.group), Body: body}}
	orig.WithTag(eventType)
	orig.WithKeys([]string{"k-" + eventID})
	orig.WithProperty("EVENT_ID", eventID)
	orig.WithProperty(primitive.PropertyRetryTopic, "ORDER")
	for k, v := range props {
		orig.WithProperty(k, v)
	}
	res, err := p.SendSync(context.Background(), letter.Message(letter.Origin{Msg: orig, Group: w.group, Topic: "ORDER"}, reason, time.Now()))
	require.NoError(w.t, err)
	require.Equal(w.t, primitive.SendOK, res.Status)
	return res
}

// brokerName is the name of the broker holding the group's DLQ topic.
func (w *cliDLQ) brokerName() string {
	w.t.Helper()
	r, err := rmq.TopicRoute(context.Background(), []string{w.ns}, rmq.DLQTopic(w.group))
	require.NoError(w.t, err)
	require.Len(w.t, r, 1)
	return r[0].BrokerName
}

// rmqguard runs the CLI with args (after --namesrv and the group's dlq subcommand) and returns stdout,
// stderr (with the error line main would print) and the exit code.
func (w *cliDLQ) rmqguard(sub string, args ...string) (stdout, stderr string, code int) {
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"--namesrv", w.ns, "--timeout", "20s", "dlq", sub, "--group", w.group}, args...))
	err := root.Execute()
	var e *exitError
	if err != nil && (!asExitError(err, &e) || e.err != nil) {
		errOut.WriteString("rmqguard: error: " + err.Error() + "\n")
	}
	return out.String(), errOut.String(), exitCode(err)
}

// Without a database, `dlq list` shows the letters with their broker and the replay status as unknown.
func TestCLI_DLQList_FiltersFormatsAndExitCodes(t *testing.T) {
	t.Setenv(envMySQLDSN, "")
	w := newCLIDLQ(t, 6)
	a := w.publish("e-a", "OrderCreated", "invalid JSON: unexpected end", []byte(`{"x":1}`), nil)
	b := w.publish("e-b", "OrderPaid", "retries exhausted after 2", []byte(`{"x":2}`), nil)
	broker := w.brokerName()

	out, errOut, code := w.rmqguard("list")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "replay status not known (?): pass --mysql-dsn or set "+envMySQLDSN)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Regexp(t, `^DLQ MSG ID\s+BROKER\s+EVENT ID\s+ORIGIN TOPIC\s+EVENT TYPE\s+REASON\s+ATTEMPTS\s+FAILED AT\s+REPLAYED\s+PROCESSED$`, lines[0])
	assert.Regexp(t, `^`+a.MsgID+`\s+`+broker+`\s+e-a\s+ORDER\s+OrderCreated\s+invalid JSON: unexpected end\s+2\s+20\d\d-\S+\s+\?\s+\?$`, lines[1])
	assert.Regexp(t, `^`+b.MsgID+`\s+`+broker+`\s+e-b\s+ORDER\s+OrderPaid\s+retries exhausted after 2\s+2\s+`, lines[2])

	out, errOut, code = w.rmqguard("list", "-o", "json", "--event-type", "OrderPaid", "--since", "1h")
	require.Equal(t, 0, code, errOut)
	var rows []listRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 1)
	assert.Equal(t, listRow{MsgID: b.MsgID, StoreID: b.OffsetMsgID, Broker: broker, EventID: "e-b", OriginTopic: "ORDER", EventType: "OrderPaid",
		Reason: "retries exhausted after 2", Attempts: 2, FailedAt: rows[0].FailedAt, ReplayStatus: "unknown"}, rows[0])
	assert.WithinDuration(t, time.Now(), rows[0].FailedAt, time.Minute)

	out, errOut, code = w.rmqguard("list", "--key", "k-e-a", "--reason", "JSON")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "e-a")
	assert.NotContains(t, out, "e-b")

	out, errOut, code = w.rmqguard("list", "--limit", "1")
	assert.Equal(t, 1, code, "a scan stopped by the limit is incomplete")
	assert.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 2, "what was read is printed: header and one row")
	assert.Contains(t, errOut, "incomplete scan of %DLQ%"+w.group)
	assert.Contains(t, errOut, "limit 1 reached")

	for _, bad := range [][]string{{"--since", "yesterday"}, {"-o", "yaml"}, {"--limit", "-1"}, {"--since", "1h", "--until", "2h"}, {"--bogus-flag"}, {"extra-arg"}} {
		_, errOut, code = w.rmqguard("list", bad...)
		assert.Equal(t, 2, code, "usage error for %v: %s", bad, errOut)
	}
	root := newRootCmd()
	root.SetArgs([]string{"--namesrv", w.ns, "dlq", "list"})
	root.SetErr(&bytes.Buffer{})
	err := root.Execute()
	assert.Equal(t, 2, exitCode(err), "no --group: %v", err)
}

// F42: with the dedup database, `dlq list` shows each letter's replay status from the audit (when, by whom,
// or failed) and whether its event was processed since; a letter never replayed shows "-".
func TestCLI_DLQList_ShowsReplayStatusAndProcessedFromTheDatabase(t *testing.T) {
	w := newCLIDLQ(t, 6)
	sent := w.publish("e-sent", "OrderCreated", "bug", []byte(`{}`), nil)
	failedSend := w.publish("e-failed", "OrderCreated", "bug", []byte(`{}`), nil)
	waiting := w.publish("e-waiting", "OrderCreated", "bug", []byte(`{}`), nil)
	db := testenv.MySQL(t)
	ctx := context.Background()
	_, err := dlq.Migrate(ctx, db.DB)
	require.NoError(t, err)
	audit, err := dlqtool.NewMySQLAudit(db)
	require.NoError(t, err)
	for _, r := range []struct {
		res    *primitive.SendResult
		status dlqtool.AuditStatus
	}{{sent, dlqtool.AuditSent}, {failedSend, dlqtool.AuditFailed}} {
		rec := dlqtool.AuditRecord{Group: w.group, StoreID: r.res.OffsetMsgID, ReplayID: "run-1", Status: dlqtool.AuditSending, ReplayedBy: "alice"}
		won, err := audit.Claim(ctx, rec, nil)
		require.NoError(t, err)
		require.True(t, won)
		rec.Status = r.status
		require.NoError(t, audit.Finish(ctx, rec))
	}
	_, err = db.Exec(`INSERT INTO processed_event (consumer_group, event_id, topic, msg_id, consumed_at, result_status)
		VALUES (?, 'e-sent', 'ORDER', 'm', UTC_TIMESTAMP(6), 'SUCCESS')`, w.group)
	require.NoError(t, err)

	out, errOut, code := w.rmqguard("list", "--mysql-dsn", testenv.MySQLDSN())
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, errOut, "replay status not known")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	assert.Regexp(t, `^`+sent.MsgID+`\s.*\s20\d\d-\S+Z by alice\s+yes$`, lines[1])
	assert.Regexp(t, `^`+failedSend.MsgID+`\s.*\sfailed 20\d\d-\S+Z by alice\s+no$`, lines[2])
	assert.Regexp(t, `^`+waiting.MsgID+`\s.*\s-\s+no$`, lines[3])

	out, errOut, code = w.rmqguard("list", "--mysql-dsn", testenv.MySQLDSN(), "-o", "json")
	require.Equal(t, 0, code, errOut)
	var rows []listRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 3)
	yes, no := true, false
	assert.Equal(t, []string{"sent", "failed", "not-replayed"}, []string{rows[0].ReplayStatus, rows[1].ReplayStatus, rows[2].ReplayStatus})
	assert.Equal(t, []*bool{&yes, &no, &no}, []*bool{rows[0].Processed, rows[1].Processed, rows[2].Processed})
	assert.Equal(t, "alice", rows[0].ReplayedBy)
	assert.Equal(t, "run-1", rows[0].ReplayID)
	require.NotNil(t, rows[0].ReplayedAt)
	assert.WithinDuration(t, time.Now(), *rows[0].ReplayedAt, time.Minute)
	assert.Nil(t, rows[2].ReplayedAt)

	out, errOut, code = w.rmqguard("list", "--mysql-dsn", "u:p@tcp(127.0.0.1:1)/db?timeout=1s")
	assert.Equal(t, 1, code, "a database that cannot be read is a failure")
	assert.Regexp(t, `^`+waiting.MsgID+`\s.*\s\?\s+\?$`, strings.Split(strings.TrimSpace(out), "\n")[3], "the letters are listed all the same")
	assert.Contains(t, errOut, "replay status not known (?): ")
}

func TestCLI_DLQShow_FindsALetterByAnyOfItsIDsJSONPrettyBinaryAsHexCutAtMaxBody(t *testing.T) {
	w := newCLIDLQ(t, 6)
	j := w.publish("e-json", "OrderCreated", "invalid amount", []byte(`{"orderNo":"o-1","amount":-5}`), map[string]string{"traceparent": "00-abc-01"})
	bin := append([]byte{0x00, 0x01, 0xfe}, []byte("plain text after binary")...)
	b := w.publish("e-bin", "OrderCreated", "not JSON", bin, nil)

	out, errOut, code := w.rmqguard("show", j.MsgID)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "DLQ message ID: "+j.MsgID+"\n")
	assert.Regexp(t, `\nstore ID: +`+j.OffsetMsgID+`\n`, out)
	assert.Regexp(t, `\nbroker: +`+w.brokerName()+`\n`, out)
	assert.Regexp(t, `\norigin: +topic ORDER, message ID MSG-`, out)
	assert.Regexp(t, `\nreason: +invalid amount\n`, out)
	assert.Regexp(t, `\nattempts: +2\n`, out)
	assert.NotContains(t, out, "MAX_OFFSET", "the client's read-time decorations are not letter properties")
	assert.Contains(t, out, "body (29 bytes, JSON):\n  {\n    \"orderNo\": \"o-1\",\n    \"amount\": -5\n  }\n")
	iEvent, iTrace := strings.Index(out, "  EVENT_ID = e-json"), strings.Index(out, "  traceparent = 00-abc-01")
	assert.True(t, iEvent > 0 && iTrace > iEvent, "properties sorted by name:\n%s", out)

	out, errOut, code = w.rmqguard("show", b.OffsetMsgID, "--max-body", "8")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "DLQ message ID: "+b.MsgID+"\n", "found by store ID")
	assert.Contains(t, out, "body (26 bytes, not JSON: hex and printable text):\n  00000000  00 01 fe 70 6c 61 69 6e")
	assert.Contains(t, out, "|...plain|")
	assert.Contains(t, out, "(18 more bytes)")

	out, errOut, code = w.rmqguard("show", "e-json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "DLQ message ID: "+j.MsgID+"\n", "found by event ID")
	origin := regexp.MustCompile(`\norigin: +topic ORDER, message ID (\S+)\n`).FindStringSubmatch(out)
	require.Len(t, origin, 2, out)
	out, errOut, code = w.rmqguard("show", origin[1])
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "DLQ message ID: "+j.MsgID+"\n", "found by the origin message ID, the one the consumer logged")

	_, errOut, code = w.rmqguard("show", "NO-SUCH-ID")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no letter whose message ID, store ID, origin message ID or event ID is NO-SUCH-ID")
	assert.Contains(t, errOut, "rmqguard dlq list", "the error says where the IDs are")
	_, _, code = w.rmqguard("show")
	assert.Equal(t, 2, code, "MSGID missing")
}

func TestCLI_DLQList_CutsALongReasonInTheTableAndKeepsItWholeInJSON(t *testing.T) {
	w := newCLIDLQ(t, 6)
	reason := "unidentifiable message: no business event ID: " + strings.Repeat("property EVENT_ID missing, ", 5)
	w.publish("e-long", "OrderCreated", reason, []byte(`{}`), nil)

	out, errOut, code := w.rmqguard("list", "--mysql-dsn", testenv.MySQLDSN())
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, string([]rune(reason)[:reasonWidth-1])+"…")
	assert.NotContains(t, out, reason)

	out, errOut, code = w.rmqguard("list", "--mysql-dsn", testenv.MySQLDSN(), "-o", "json")
	require.Equal(t, 0, code, errOut)
	var rows []listRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 1)
	assert.Equal(t, reason, rows[0].Reason)
}

func TestCLI_DLQExport_FileRoundTripsThroughReadExport(t *testing.T) {
	w := newCLIDLQ(t, 6)
	w.publish("e-1", "OrderCreated", "r1", []byte{0xff, 0x00, '{'}, map[string]string{"traceparent": "00-t"})
	w.publish("e-2", "OrderPaid", "r2", []byte(`{"n":2}`), nil)
	res, err := dlqtool.Scan(context.Background(), topics.Cluster{NameServers: []string{w.ns}}, w.group, dlqtool.ScanOptions{})
	require.NoError(t, err)
	require.Len(t, res.Letters, 2)

	path := filepath.Join(t.TempDir(), "letters.jsonl")
	_, errOut, code := w.rmqguard("export", "-o", path)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "exported 2 letters of %DLQ%"+w.group+" to "+path+" (complete)")
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h, letters, err := dlqtool.ReadExportFile(f)
	require.NoError(t, err)
	assert.Equal(t, res.Letters, letters, "body bytes, properties and metadata survive the file")
	assert.True(t, h.Complete)
	assert.Equal(t, w.group, h.Group)
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left behind")

	out, errOut, code := w.rmqguard("export", "-o", "-", "--limit", "1")
	require.Equal(t, 1, code, "limit 1 with a letter unread is incomplete: %s", errOut)
	h, letters, err = dlqtool.ReadExportFile(strings.NewReader(out))
	require.NoError(t, err)
	assert.False(t, h.Complete, "the file says it is incomplete")
	assert.NotEmpty(t, h.Problems)
	require.Len(t, letters, 1)
	assert.Equal(t, "e-1", letters[0].EventID)

	out, errOut, code = w.rmqguard("export", "-o", "-", "--event-type", "OrderPaid", "--limit", "1")
	require.Equal(t, 0, code, "the limit reached on the last letter leaves nothing unread: %s", errOut)
	h, letters, err = dlqtool.ReadExportFile(strings.NewReader(out))
	require.NoError(t, err)
	assert.True(t, h.Complete)
	require.Len(t, letters, 1)
	assert.Equal(t, "e-2", letters[0].EventID)

	_, _, code = w.rmqguard("export")
	assert.Equal(t, 2, code, "-o is required")
}

// F17 through the CLI: a write-only DLQ is an error naming the perm and --fix-perm, never an empty list;
// with --fix-perm it is made readable, said so, and listed.
func TestF17_CLI_WriteOnlyDLQ(t *testing.T) {
	w := newCLIDLQ(t, 2)
	m := w.publish("e-wo", "OrderCreated", "invalid JSON", []byte(`{}`), nil)

	out, errOut, code := w.rmqguard("list")
	assert.Equal(t, 1, code)
	assert.Empty(t, out, "no table for a DLQ that could not be read")
	assert.Contains(t, errOut, "perm 2")
	assert.Contains(t, errOut, "run with --fix-perm")

	out, errOut, code = w.rmqguard("list", "--fix-perm")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "%DLQ%"+w.group+" was write-only (perm 2); made readable (perm 6), 1 read / 1 write queues kept")
	assert.Contains(t, out, m.MsgID)
	assert.Contains(t, out, "e-wo")
}

// A group that never dead-lettered anything has no DLQ topic: said plainly, empty list, exit 0.
func TestCLI_DLQList_MissingDLQ(t *testing.T) {
	w := newCLIDLQ(t, 0)
	out, errOut, code := w.rmqguard("list", "-o", "json")
	require.Equal(t, 0, code, errOut)
	assert.JSONEq(t, `[]`, out)
	assert.Contains(t, errOut, "no dead letters: %DLQ%"+w.group+" does not exist (created on the first dead letter)")
}
