package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
	"github.com/rmqguard/rmqguard/topics"
)

// replayDecision is a replay that reached the chain, and the outcome the chain decided for it.
type replayDecision struct {
	eventID, replayOf, topic string
	kind                     consumer.Kind
}

// editWorld is a group whose handler refuses, permanently, a body naming an unknown SKU (a poison message),
// with the dedup chain, a DLQ publisher and a ledger of effects; handled records the body each event was
// applied with, decided every replay that reached the chain with its outcome.
type editWorld struct {
	*world
	db      *sqlx.DB
	ledger  *testenv.Ledger
	sink    *countingSink
	mu      sync.Mutex
	handled map[string]string
	decided []replayDecision
}

// decisions is the outermost middleware: it records each replay's outcome.
func (w *editWorld) decisions() middleware.Middleware {
	return middleware.Func(func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			out, err := next.Handle(ctx, d)
			if d.Msg.GetProperty(letter.PropReplayID) != "" {
				w.mu.Lock()
				w.decided = append(w.decided, replayDecision{eventID: d.Msg.GetProperty("EVENT_ID"),
					replayOf: d.Msg.GetProperty(letter.PropReplayOf), topic: d.Topic, kind: out.Kind})
				w.mu.Unlock()
			}
			return out, err
		})
	})
}

func (w *editWorld) replays() []replayDecision {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]replayDecision(nil), w.decided...)
}

func newEditWorld(t *testing.T) *editWorld {
	w := &editWorld{world: newWorld(t, 1), db: shoptest.MySQL(t), handled: map[string]string{}}
	w.ledger = testenv.NewLedger(t, w.db, w.run)
	store, err := dedup.NewStore(w.db)
	require.NoError(t, err)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	log := zaptest.NewLogger(t, zaptest.Level(zap.DPanicLevel))
	business := func(_ context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if bytes.Contains(d.Msg.Body, []byte("no-such-sku")) {
			return consumer.Outcome{}, retry.Permanent(errors.New("unknown SKU no-such-sku"))
		}
		w.mu.Lock()
		w.handled[d.EventID] = string(d.Msg.Body)
		w.mu.Unlock()
		return consumer.Processed(), nil
	}
	handler := testenv.Must(middleware.Chain(dedup.Handle(w.ledger.Handler(business)), w.decisions(),
		middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))))
	publisher, err := dlq.NewPublisher(w.prod)
	require.NoError(t, err)
	w.sink = &countingSink{inner: publisher}
	w.start(consumer.Config{MaxAttempts: 2, DrainTimeout: 5 * time.Second}, handler, consumer.WithLogger(log), consumer.WithDeadLetterSink(w.sink))
	return w
}

// deadLetter sends event id with body and waits until it is the world's n-th dead letter; it returns the letter.
func (w *editWorld) deadLetter(id, body string, n int32) dlqtool.Letter {
	w.t.Helper()
	msg := primitive.NewMessage(w.topic, []byte(body))
	msg.WithTag("OrderCreated")
	msg.WithProperty("EVENT_ID", id)
	w.send(msg)
	require.Eventually(w.t, func() bool { return w.sink.n.Load() == n }, 60*time.Second, 100*time.Millisecond, "%s is dead-lettered", id)
	res, err := dlqtool.Scan(w.ctx, topics.Cluster{NameServers: w.ns}, w.group, dlqtool.ScanOptions{Filter: dlqtool.Filter{Key: id}})
	require.NoError(w.t, err)
	require.Len(w.t, res.Letters, 1)
	return res.Letters[0]
}

func (w *editWorld) handledBody(id string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.handled[id]
}

// S5 for edits, end to end with the CLI as a process: a poison message is dead-lettered; `dlq edit
// --dry-run` sends nothing; `dlq edit --yes` sends the corrected body, which the consumer applies once under
// the same event ID; `dlq replay` afterwards sends nothing and reports the letter superseded; `dlq list`
// says SUPERSEDED. Two `dlq edit` processes at once on another letter: one sends, the other is refused, one
// effect.
func TestE2E_S5_DLQEditThenReplayAppliesTheEditedBodyOnceAndSupersedesTheLetter(t *testing.T) {
	w := newEditWorld(t)
	bin := buildRMQGuard(t)
	evA, evB := w.run+"-A", w.run+"-B"
	a := w.deadLetter(evA, `{"orderNo":"o-A","sku":"no-such-sku"}`, 1)
	b := w.deadLetter(evB, `{"orderNo":"o-B","sku":"no-such-sku"}`, 2)
	dir := t.TempDir()
	fixedA := filepath.Join(dir, "a.json")
	require.NoError(t, os.WriteFile(fixedA, []byte(`{"orderNo":"o-A","sku":"sku-42"}`), 0o600))
	dsn := testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN)
	base := []string{"--namesrv", w.ns[0], "dlq"}
	run := func(sub string, args ...string) (string, int) {
		flags := []string{sub, "--mysql-dsn", dsn, "--group", w.group}
		if sub != "list" {
			flags = append(flags, "--operator", "e2e")
		}
		return cli(t, bin, append(append(append([]string{}, base...), flags...), args...)...)
	}

	out, code := run("edit", "--id", a.StoreID, "--body-file", fixedA, "--dry-run")
	t.Logf("dry run:\n%s", out)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "+   \"sku\": \"sku-42\"")
	assert.Contains(t, out, "(dry run: nothing sent or recorded)")

	out, code = run("edit", "--id", a.StoreID, "--body-file", fixedA, "--yes")
	t.Logf("edit:\n%s", out)
	require.Equal(t, 0, code)
	require.Eventually(t, func() bool { return w.ledger.Count(t, evA) == 1 }, 30*time.Second, 100*time.Millisecond, "the edited copy takes effect")
	assert.Equal(t, `{"orderNo":"o-A","sku":"sku-42"}`, w.handledBody(evA), "applied with the edited body, under the same event ID")

	out, code = run("replay", "--yes", "--key", evA)
	t.Logf("replay of the original:\n%s", out)
	assert.Equal(t, 0, code, "a superseded letter needs no replay")
	assert.Contains(t, out, "sent 0, would send 0, skipped: already replayed 0, uncertain 0, already processed 0, no origin 0, superseded by an edit 1; failed 0",
		"the superseded check comes before the processed one")
	out, code = run("list")
	require.Equal(t, 0, code, out)
	assert.Regexp(t, a.MsgID+`\s.*\sSUPERSEDED edited 20\S+Z by e2e\s+yes\n`, out)

	// Two edits of B at once, by two processes: one claims and sends, the other is refused.
	outs, cmds := make([]bytes.Buffer, 2), make([]*exec.Cmd, 2)
	for i := range cmds {
		body := filepath.Join(dir, "b"+string(rune('0'+i))+".json")
		require.NoError(t, os.WriteFile(body, []byte(`{"orderNo":"o-B","sku":"sku-`+string(rune('0'+i))+`"}`), 0o600))
		cmds[i] = exec.CommandContext(w.ctx, bin, append(append(append([]string{}, base...), "edit"),
			"--mysql-dsn", dsn, "--group", w.group, "--operator", "op-"+string(rune('0'+i)), "--id", b.StoreID, "--body-file", body, "--yes")...)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
	}
	for _, c := range cmds {
		require.NoError(t, c.Start())
	}
	var exits []int
	for i, c := range cmds {
		err := c.Wait()
		t.Logf("edit %d:\n%s", i, outs[i].String())
		var exit *exec.ExitError
		switch {
		case err == nil:
			exits = append(exits, 0)
		case errors.As(err, &exit):
			exits = append(exits, exit.ExitCode())
			assert.Contains(t, outs[i].String(), "skipped-superseded", "the loser is refused as superseded")
			assert.Regexp(t, `edited (at the same time )?by op-`, outs[i].String(), "and told which edit sends it")
		default:
			require.NoError(t, err)
		}
	}
	assert.ElementsMatch(t, []int{0, 1}, exits, "one edit sends, the other exits 1")
	require.Eventually(t, func() bool { return w.ledger.Count(t, evB) == 1 }, 30*time.Second, 100*time.Millisecond, "B's edited copy takes effect")

	time.Sleep(3 * time.Second) // a further delivery, had anything else been sent, arrives within this
	assert.Equal(t, 1, w.ledger.Count(t, evA), "A took effect once")
	assert.Equal(t, 1, w.ledger.Count(t, evB), "B took effect once")
	got := w.replays()
	assert.Len(t, got, 2, "two edited copies reached the consumer, nothing else: %+v", got)
	for _, d := range got {
		assert.Equal(t, w.topic, d.topic, "presented on the original topic")
		assert.Contains(t, []string{a.StoreID, b.StoreID}, d.replayOf)
		assert.Equal(t, consumer.KindProcessed, d.kind)
	}
}

// staleProcessed answers "not processed" whatever the table says: the check ran before the event was
// applied, and the edited copy is sent in between.
type staleProcessed struct{}

func (staleProcessed) Processed(context.Context, string, string) (bool, error) { return false, nil }

// S5 for edits: dedup still applies to an edited copy. The event of a letter is applied meanwhile by
// another message (a producer's re-send with a good body); the edited copy, sent under the same event ID
// after a check that came too early, reaches the consumer and is a duplicate: one effect, with the body
// of the re-send.
func TestE2E_S5_AnEditedCopyOfAnEventAppliedMeanwhileIsADuplicate(t *testing.T) {
	w := newEditWorld(t)
	ev := w.run + "-C"
	l := w.deadLetter(ev, `{"orderNo":"o-C","sku":"no-such-sku"}`, 1)
	resend := primitive.NewMessage(w.topic, []byte(`{"orderNo":"o-C","sku":"resent"}`))
	resend.WithProperty("EVENT_ID", ev)
	w.send(resend)
	require.Eventually(t, func() bool { return w.ledger.Count(t, ev) == 1 }, 30*time.Second, 100*time.Millisecond, "the re-send takes effect")

	_, err := dlq.Migrate(w.ctx, w.db.DB)
	require.NoError(t, err)
	audit, err := dlqtool.NewMySQLAudit(w.db)
	require.NoError(t, err)
	prod, err := rmq.StartProducer(w.ns, w.group+"-edit")
	require.NoError(t, err)
	t.Cleanup(func() { _ = prod.Shutdown() })
	res, err := dlqtool.ReplayEdited(w.ctx, l, []byte(`{"orderNo":"o-C","sku":"edited"}`), dlqtool.ReplayOptions{Group: w.group,
		Operator: "e2e", Sender: prod, Audit: audit, Processed: staleProcessed{}})
	require.NoError(t, err)
	require.Equal(t, dlqtool.ReplaySent, res.Outcome, "%+v", res)

	var got []replayDecision
	require.Eventually(t, func() bool { got = w.replays(); return len(got) == 1 }, 30*time.Second, 100*time.Millisecond,
		"the edited copy reaches the consumer")
	assert.Equal(t, replayDecision{eventID: ev, replayOf: l.StoreID, topic: w.topic, kind: consumer.KindDuplicate}, got[0],
		"the edited copy is a duplicate of the event applied meanwhile")
	assert.Equal(t, 1, w.ledger.Count(t, ev), "one effect")
	assert.Equal(t, `{"orderNo":"o-C","sku":"resent"}`, w.handledBody(ev), "the handler never ran with the edited body")
}
