package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/go-sql-driver/mysql"
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
)

// replayDelivery is what a handler saw of a delivery that carried replay provenance.
type replayDelivery struct {
	group, eventID, topic, msgTopic, replayOf, keys, tags, trace string
	attempt                                                      int
}

// replays records the deliveries carrying letter.PropReplayID that reach a chain.
type replays struct {
	mu  sync.Mutex
	got []replayDelivery
}

func (r *replays) middleware(group string) middleware.Middleware {
	return middleware.Func(func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			if d.Msg.GetProperty(letter.PropReplayID) != "" {
				r.mu.Lock()
				r.got = append(r.got, replayDelivery{group: group, eventID: d.Msg.GetProperty("EVENT_ID"), topic: d.Topic,
					msgTopic: d.Msg.Topic, replayOf: d.Msg.GetProperty(letter.PropReplayOf), keys: d.Msg.GetKeys(),
					tags: d.Msg.GetTags(), trace: d.Msg.GetProperty("traceparent"), attempt: d.Attempt})
				r.mu.Unlock()
			}
			return next.Handle(ctx, d)
		})
	})
}

func (r *replays) snapshot() []replayDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]replayDelivery(nil), r.got...)
}

// countingSink publishes through a dlq.Publisher and counts the letters it stored.
type countingSink struct {
	inner *dlq.Publisher
	n     atomic.Int32
}

func (s *countingSink) DeadLetter(ctx context.Context, d *consumer.Delivery, reason string) error {
	err := s.inner.DeadLetter(ctx, d, reason)
	if err == nil {
		s.n.Add(1)
	}
	return err
}

// buildRMQGuard builds cmd/rmqguard into a temporary folder. The CLI runs as a process: its exit code is
// part of what is tested, and the e2e package (not the -race cmd package) is where the client's pull
// consumer may run.
func buildRMQGuard(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rmqguard")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/rmqguard/rmqguard/cmd/rmqguard").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// cli runs the rmqguard binary with args (stdin is not a terminal) and returns its output and exit code.
func cli(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), exit.ExitCode()
	}
	require.NoError(t, err, "run rmqguard %v", args)
	return out.String(), 0
}

// TestE2E_S5_F18_DLQReplaySafeTwiceToTheDeadLetteredGroupOnly is the end-to-end replay test on the
// real broker and MariaDB. Group cg (dedup chain, DLQ publisher) and group cg2 consume one topic. With a
// "bug" switch on, event A fails permanently and is dead-lettered; B is processed, and a letter of B is in
// the DLQ as well (an event that in fact succeeded); C's letter has no origin topic. With the bug fixed:
//   - --dry-run decides (A would go, B already processed, C no origin) and sends and records nothing;
//   - without --yes, a replay of three letters is refused (stdin is not a terminal), exit 2;
//   - replay: A is sent and takes effect exactly once, in cg only, on the original topic (F18), with
//     ReconsumeTimes 0, its KEYS, tag and user properties; B is skipped as already processed (S5); C is
//     skipped and listed (exit 1);
//   - replay again: nothing is sent (A already replayed);
//   - --target-topic: C is sent and takes effect once.
func TestE2E_S5_F18_DLQReplaySafeTwiceToTheDeadLetteredGroupOnly(t *testing.T) {
	w := newWorld(t, 1)
	db := shoptest.MySQL(t)
	bin := buildRMQGuard(t)
	ctx, topic, group, run := w.ctx, w.topic, w.group, w.run
	group2 := group + "-other"
	require.NoError(t, rmq.EnsureGroupTopics(ctx, w.ns, testenv.Broker(t), group2))

	seen := &replays{}
	var bug atomic.Bool
	var mu sync.Mutex
	processed := map[string]*primitive.MessageExt{}
	ledger := testenv.NewLedger(t, db, run)
	business := func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if bug.Load() {
			return consumer.Outcome{}, retry.Permanent(errors.New("bug: unknown SKU"))
		}
		mu.Lock()
		processed[d.EventID] = d.Msg
		mu.Unlock()
		return consumer.Processed(), nil
	}
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	handler := testenv.Must(middleware.Chain(dedup.Handle(ledger.Handler(business)), seen.middleware("cg"), middleware.Recover(log),
		middleware.Classify(), eventID, middleware.Timeout(10*time.Second), testenv.Must(middleware.Dedup(store))))
	publisher, err := dlq.NewPublisher(w.prod)
	require.NoError(t, err)
	sink := &countingSink{inner: publisher}
	w.start(consumer.Config{MaxAttempts: 2, DrainTimeout: 5 * time.Second}, handler, consumer.WithLogger(log), consumer.WithDeadLetterSink(sink))
	other, err := consumer.New(consumer.Config{NameServers: w.ns, Group: group2, MaxAttempts: 2,
		Subscriptions: []consumer.Subscription{{Topic: topic}}, StartFromFirstOffset: true},
		testenv.Must(middleware.Chain(consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) { return consumer.Processed(), nil }),
			seen.middleware("cg2"))), consumer.WithLogger(log))
	require.NoError(t, err)
	require.NoError(t, other.Start())
	t.Cleanup(func() { _ = other.Shutdown(context.Background()) })

	event := func(id string) *primitive.Message {
		msg := primitive.NewMessage(topic, []byte(`{"eventId":"`+id+`"}`))
		msg.WithTag("OrderCreated")
		msg.WithKeys([]string{"order-" + id})
		msg.WithProperty("EVENT_ID", id)
		msg.WithProperty("traceparent", "00-"+id)
		return msg
	}
	evA, evB, evC := run+"-A", run+"-B", run+"-C"

	// A fails permanently while the bug is on and is dead-lettered with its reason.
	bug.Store(true)
	w.send(event(evA))
	require.Eventually(t, func() bool { return sink.n.Load() == 1 }, 60*time.Second, 100*time.Millisecond, "A is dead-lettered")
	bug.Store(false)
	// B is processed; then a letter of B lands in the DLQ too (as after a batch whose publish was retried).
	w.send(event(evB))
	require.Eventually(t, func() bool { return ledger.Count(t, evB) == 1 }, 60*time.Second, 100*time.Millisecond, "B takes effect")
	mu.Lock()
	msgB := processed[evB]
	mu.Unlock()
	require.NoError(t, publisher.DeadLetter(ctx, testenv.NewDelivery(group, msgB), "injected: letter of a processed event"))
	// C's letter has no origin topic (no RETRY_TOPIC), as a letter written by another tool might.
	noOrigin := event(evC)
	noOrigin.Topic = rmq.DLQTopic(group)
	w.send(noOrigin)

	dsn := testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN)
	base := []string{"dlq", "replay", "--namesrv", w.ns[0], "--mysql-dsn", dsn, "--group", group, "--operator", "e2e"}
	replay := func(args ...string) (string, int) {
		return cli(t, bin, append(append([]string{}, base...), args...)...)
	}
	auditRows := func() map[string]string {
		var rows []struct {
			EventID string `db:"event_id"`
			Status  string `db:"status"`
		}
		err := db.Select(&rows, `SELECT event_id, status FROM `+dlqtool.AuditTable+` WHERE consumer_group = ?`, group)
		var myErr *mysql.MySQLError
		if errors.As(err, &myErr) && myErr.Number == 1146 { // ER_NO_SUCH_TABLE: no replay has run on this database yet
			return map[string]string{}
		}
		require.NoError(t, err)
		out := map[string]string{}
		for _, r := range rows {
			out[r.EventID] = r.Status
		}
		return out
	}

	out, code := replay("--dry-run")
	t.Logf("dry run:\n%s", out)
	assert.Equal(t, 1, code, "a letter with no origin makes the exit 1")
	assert.Contains(t, out, "(dry run: nothing sent or recorded)")
	assert.Contains(t, out, "selected 3, sent 0, would send 1, skipped: already replayed 0, uncertain 0, already processed 1, no origin 1; failed 0")
	assert.Regexp(t, `skipped-already-processed +dlq=\S+ broker=\S+ event=`+evB, out)
	assert.Regexp(t, `skipped-no-origin +dlq=\S+ broker=\S+ event=`+evC+`: no origin topic \(RETRY_TOPIC\); pass --target-topic`, out)
	assert.Empty(t, auditRows(), "a dry run records nothing")

	out, code = replay()
	assert.Equal(t, 2, code, "refused without --yes and without a terminal: %s", out)
	assert.Contains(t, out, "pass --yes")

	out, code = replay("--yes")
	t.Logf("replay:\n%s", out)
	assert.Equal(t, 1, code, "C was not sent")
	assert.Contains(t, out, "selected 3, sent 1, would send 0, skipped: already replayed 0, uncertain 0, already processed 1, no origin 1; failed 0")
	require.Eventually(t, func() bool { return ledger.Count(t, evA) == 1 }, 30*time.Second, 100*time.Millisecond, "the replay of A takes effect")
	assert.Equal(t, map[string]string{evA: "sent"}, auditRows())

	out, code = replay("--yes")
	t.Logf("replay again:\n%s", out)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "selected 3, sent 0, would send 0, skipped: already replayed 1, uncertain 0, already processed 1, no origin 1; failed 0")
	assert.Regexp(t, `skipped-already-replayed +dlq=\S+ broker=\S+ event=`+evA+` topic=`+topic+`: sent by replay `, out)

	out, code = replay("--yes", "--target-topic", topic)
	t.Logf("replay with --target-topic:\n%s", out)
	assert.Equal(t, 0, code, "every letter sent or needing no replay")
	assert.Contains(t, out, "selected 3, sent 1, would send 0, skipped: already replayed 1, uncertain 0, already processed 1, no origin 0; failed 0")
	require.Eventually(t, func() bool { return ledger.Count(t, evC) == 1 }, 30*time.Second, 100*time.Millisecond, "the replay of C takes effect")

	time.Sleep(3 * time.Second) // a further replay delivery, if any had been sent, arrives within this
	assert.Equal(t, 1, ledger.Count(t, evA), "A took effect exactly once")
	assert.Equal(t, 1, ledger.Count(t, evB), "B took effect once, before the replay")
	assert.Equal(t, map[string]string{evA: "sent", evC: "sent"}, auditRows())
	got := seen.snapshot()
	require.Len(t, got, 2, "exactly two replays were delivered, both to cg (none to cg2): %+v", got)
	byEvent := map[string]replayDelivery{}
	for _, d := range got {
		assert.Equal(t, "cg", d.group, "only the dead-lettered group receives a replay")
		assert.Equal(t, topic, d.topic, "F18: the handler sees the original topic")
		assert.Equal(t, topic, d.msgTopic, "F18: the client restored the topic too")
		assert.Zero(t, d.attempt, "a replay starts at ReconsumeTimes 0")
		assert.NotEmpty(t, d.replayOf)
		byEvent[d.eventID] = d
	}
	require.Contains(t, byEvent, evA)
	assert.Equal(t, "order-"+evA, byEvent[evA].keys)
	assert.Equal(t, "OrderCreated", byEvent[evA].tags)
	assert.Equal(t, "00-"+evA, byEvent[evA].trace)
}

// TestE2E_S5_DLQReplayTwoRunsAtOnceSendEachLetterOnce starts two `rmqguard dlq replay` processes at the
// same moment on a DLQ of 12 letters: the audit claim (MariaDB primary key) lets exactly one of them send
// each letter, each event takes effect once, and a third run afterwards sends nothing and exits 0.
func TestE2E_S5_DLQReplayTwoRunsAtOnceSendEachLetterOnce(t *testing.T) {
	w := newWorld(t, 1)
	db := shoptest.MySQL(t)
	bin := buildRMQGuard(t)
	ctx, topic, group, run := w.ctx, w.topic, w.group, w.run
	const events = 12

	var bug atomic.Bool
	ledger := testenv.NewLedger(t, db, run)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	seen := &replays{}
	handler := testenv.Must(middleware.Chain(dedup.Handle(ledger.Handler(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		if bug.Load() {
			return consumer.Outcome{}, retry.Permanent(errors.New("bug"))
		}
		return consumer.Processed(), nil
	})), seen.middleware("cg"), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))))
	publisher, err := dlq.NewPublisher(w.prod)
	require.NoError(t, err)
	sink := &countingSink{inner: publisher}
	w.start(consumer.Config{MaxAttempts: 2, DrainTimeout: 5 * time.Second}, handler, consumer.WithLogger(log), consumer.WithDeadLetterSink(sink))

	bug.Store(true)
	for i := range events {
		msg := primitive.NewMessage(topic, []byte(`{}`))
		msg.WithProperty("EVENT_ID", run+"-"+string(rune('a'+i)))
		w.send(msg)
	}
	require.Eventually(t, func() bool { return sink.n.Load() == events }, 60*time.Second, 100*time.Millisecond, "all are dead-lettered")
	bug.Store(false)

	args := []string{"dlq", "replay", "--namesrv", w.ns[0], "--mysql-dsn", testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN),
		"--group", group, "--yes", "--rate", "200"}
	outs := make([]bytes.Buffer, 2)
	cmds := make([]*exec.Cmd, 2)
	for i := range cmds {
		cmds[i] = exec.CommandContext(ctx, bin, append(args, "--operator", "run-"+string(rune('0'+i)))...)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
	}
	for _, c := range cmds {
		require.NoError(t, c.Start())
	}
	sent := 0
	for i, c := range cmds {
		err := c.Wait()
		var exit *exec.ExitError
		if err != nil {
			require.ErrorAs(t, err, &exit, outs[i].String())
			assert.Equal(t, 1, exit.ExitCode(), "only letters the other run was sending make a run exit 1: %s", outs[i].String())
		}
		t.Logf("run %d:\n%s", i, outs[i].String())
		m := regexp.MustCompile(`selected 12, sent (\d+),`).FindStringSubmatch(outs[i].String())
		require.Len(t, m, 2, "summary line of run %d", i)
		n, _ := strconv.Atoi(m[1])
		sent += n
	}
	assert.Equal(t, events, sent, "together the two runs sent each letter once")

	require.Eventually(t, func() bool { e, _ := ledger.Totals(t); return e == events }, 30*time.Second, 100*time.Millisecond, "every replay takes effect")
	out, code := cli(t, bin, args...)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "selected 12, sent 0, would send 0, skipped: already replayed 12")
	time.Sleep(2 * time.Second)
	ledger.RequireOncePerEvent(t, events)
	assert.Len(t, seen.snapshot(), events, "one replay delivery per letter")
}

// TestE2E_DLQReplayWithoutRetryTopicNamesTheFix: a group whose %RETRY% topic does not exist (its consumers
// never ran on this cluster) cannot receive a replay; the replay stops before claiming or sending anything
// and names the topic and the command that creates it.
func TestE2E_DLQReplayWithoutRetryTopicNamesTheFix(t *testing.T) {
	ns := testenv.NameServer(t)
	broker := testenv.Broker(t)
	bin := buildRMQGuard(t)
	rlog.SetLogLevel("error")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	group := "rmqguard-e2e-" + testenv.Unique("noretry")
	require.NoError(t, rmq.EnsureTopic(ctx, []string{ns}, broker, rmq.DLQTopic(group), 1))
	prod, err := rmq.StartProducer([]string{ns}, group+"-producer")
	require.NoError(t, err)
	defer func() { _ = prod.Shutdown() }()
	letter := primitive.NewMessage(rmq.DLQTopic(group), []byte(`{}`))
	letter.WithProperty("EVENT_ID", group+"-e")
	letter.WithProperty(primitive.PropertyRetryTopic, "ORDER")
	res, err := prod.SendSync(ctx, letter)
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, res.Status)

	out, code := cli(t, bin, "dlq", "replay", "--namesrv", ns, "--mysql-dsn", testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN),
		"--group", group, "--yes")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "%RETRY%"+group+", where replays of group "+group+" go, has no writable queue")
	assert.Contains(t, out, "rmqguard topic ensure --queues 1 '%RETRY%"+group+"'")
	db := shoptest.MySQL(t)
	var claimed int
	require.NoError(t, db.Get(&claimed, `SELECT COUNT(*) FROM `+dlqtool.AuditTable+` WHERE consumer_group = ?`, group))
	assert.Zero(t, claimed, "nothing claimed")
}

// TestE2E_S5_DLQReplayFromExportFile: the letters exported with `rmqguard dlq export` replay from the file
// with the same decisions and the same audit as from the broker: a dry run sends nothing, the replay sends
// the two never-processed events (one effect each) and skips the processed one (S5), a second run from the
// file and a run from the broker send nothing.
func TestE2E_S5_DLQReplayFromExportFile(t *testing.T) {
	w := newWorld(t, 1)
	db := shoptest.MySQL(t)
	bin := buildRMQGuard(t)
	ctx, topic, group, run := w.ctx, w.topic, w.group, w.run

	var bug atomic.Bool
	ledger := testenv.NewLedger(t, db, run)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	seen := &replays{}
	var mu sync.Mutex
	processed := map[string]*primitive.MessageExt{}
	handler := testenv.Must(middleware.Chain(dedup.Handle(ledger.Handler(func(_ context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if bug.Load() {
			return consumer.Outcome{}, retry.Permanent(errors.New("bug"))
		}
		mu.Lock()
		processed[d.EventID] = d.Msg
		mu.Unlock()
		return consumer.Processed(), nil
	})), seen.middleware("cg"), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))))
	publisher, err := dlq.NewPublisher(w.prod)
	require.NoError(t, err)
	sink := &countingSink{inner: publisher}
	w.start(consumer.Config{MaxAttempts: 2, DrainTimeout: 5 * time.Second}, handler, consumer.WithLogger(log), consumer.WithDeadLetterSink(sink))

	send := func(id string) {
		msg := primitive.NewMessage(topic, []byte(`{}`))
		msg.WithProperty("EVENT_ID", id)
		w.send(msg)
	}
	ev1, ev2, evDone := run+"-1", run+"-2", run+"-done"
	bug.Store(true)
	send(ev1)
	send(ev2)
	require.Eventually(t, func() bool { return sink.n.Load() == 2 }, 60*time.Second, 100*time.Millisecond, "both are dead-lettered")
	bug.Store(false)
	send(evDone)
	require.Eventually(t, func() bool { return ledger.Count(t, evDone) == 1 }, 60*time.Second, 100*time.Millisecond)
	mu.Lock()
	msgDone := processed[evDone]
	mu.Unlock()
	require.NoError(t, publisher.DeadLetter(ctx, testenv.NewDelivery(group, msgDone), "injected: letter of a processed event"))

	file := filepath.Join(t.TempDir(), "letters.jsonl")
	out, code := cli(t, bin, "dlq", "export", "--namesrv", w.ns[0], "--group", group, "-o", file)
	require.Equal(t, 0, code, out)

	dsn := testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN)
	fromFile := []string{"dlq", "replay", "--mysql-dsn", dsn, "--group", group, "--from-file", file, "--operator", "e2e"}
	out, code = cli(t, bin, append(fromFile, "--dry-run")...) // no name server needed
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "selected 3, sent 0, would send 2, skipped: already replayed 0, uncertain 0, already processed 1, no origin 0; failed 0")

	out, code = cli(t, bin, append(fromFile, "--namesrv", w.ns[0], "--yes")...)
	t.Logf("replay from file:\n%s", out)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "selected 3, sent 2, would send 0, skipped: already replayed 0, uncertain 0, already processed 1, no origin 0; failed 0")
	require.Eventually(t, func() bool { return ledger.Count(t, ev1) == 1 && ledger.Count(t, ev2) == 1 }, 30*time.Second, 100*time.Millisecond)

	out, code = cli(t, bin, append(fromFile, "--namesrv", w.ns[0], "--yes")...)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "selected 3, sent 0, would send 0, skipped: already replayed 2, uncertain 0, already processed 1")
	out, code = cli(t, bin, "dlq", "replay", "--namesrv", w.ns[0], "--mysql-dsn", dsn, "--group", group, "--yes")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "selected 3, sent 0, would send 0, skipped: already replayed 2, uncertain 0, already processed 1",
		"the broker's letters are the file's: one audit")

	time.Sleep(2 * time.Second)
	ledger.RequireOncePerEvent(t, 3)
	assert.Len(t, seen.snapshot(), 2, "two replay deliveries in all")
}
