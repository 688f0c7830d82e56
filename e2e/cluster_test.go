package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
	"github.com/rmqguard/rmqguard/topics"
)

// F42 on a cluster of two master brokers that the test starts (a name server of its own, so that the
// shared cluster's "every master" stays one broker for the other tests): topics are ensured on each master,
// and a group's DLQ is read, shown, exported, counted and replayed on both.
func TestE2E_F42_TopicsAndDLQOnEveryMasterOfATwoMasterCluster(t *testing.T) {
	tm := testenv.StartTwoMasters(t)
	rlog.SetLogLevel("error")
	bin := buildRMQGuard(t)
	t.Run("TopicEnsureCreatesTheTopicOnEveryMasterAndSaysSoPerBroker", func(t *testing.T) {
		topicEnsureOnTwoMasters(t, tm, bin)
	})
	t.Run("DLQListShowExportCensusReplayReadEveryMaster", func(t *testing.T) {
		dlqOnTwoMasters(t, tm, bin)
	})
	t.Run("DLQCensusWithholdsTheCountWhileAMasterWithLettersIsDown", func(t *testing.T) { // stops a master: last
		censusWithAMasterDown(t, tm)
	})
}

// censusWithAMasterDown: a letter on each master's %DLQ%<group>; while master B is down (the name server
// forgets it at once, so the scan of A alone is complete), the census exports no count rather than A's 1,
// which would read as a letter replayed and, when B returns, as a new letter (a false RmqguardDLQLettersWaiting).
// Once B is back the count is 2 again.
func censusWithAMasterDown(t *testing.T, tm testenv.TwoMasters) {
	ns := []string{tm.NameServer}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db := shoptest.MySQL(t)
	run := testenv.Unique("e2e-f42-down")
	group := "rmqguard-e2e-" + run
	_, err := topics.Ensure(ctx, topics.Cluster{NameServers: ns}, topics.Topic{Name: rmq.DLQTopic(group), Queues: 1})
	require.NoError(t, err)
	sendTo(t, ctx, ns, rmq.DLQTopic(group), map[string]testenv.Master{run + "-on-a": tm.A, run + "-on-b": tm.B})
	_, err = dlq.Migrate(ctx, db.DB)
	require.NoError(t, err)
	gauge := startMonitor(t, ctx, ns, group, db)
	require.Eventually(t, func() bool { return gauge() == 2 }, 30*time.Second, 100*time.Millisecond, "rmqguard_dlq_letters_waiting")

	tm.StopMaster(t, tm.B)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			tm.StartMaster(t, tm.B)
		}
	})
	// The census before the stop may still show 2 for a moment; then no series (-1), never 1.
	seen := map[float64]bool{}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		seen[gauge()] = true
	}
	delete(seen, 2)
	assert.Equal(t, map[float64]bool{-1: true}, seen, "while %s is down: no series (-1), never a count without its letter", tm.B.Name)

	tm.StartMaster(t, tm.B)
	restarted = true
	require.Eventually(t, func() bool { return gauge() == 2 }, 60*time.Second, 100*time.Millisecond, "rmqguard_dlq_letters_waiting once %s is back", tm.B.Name)
}

// topicEnsureOnTwoMasters: `topic ensure` without --broker creates the topic on both masters and prints a
// line per broker, "exists" on each the second time; a topic on one master only (ensured with --broker A)
// is created on the other by a later call naming it or naming none, with "exists" only where it was.
func topicEnsureOnTwoMasters(t *testing.T, tm testenv.TwoMasters, bin string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := strings.ReplaceAll(testenv.Unique("F42"), "-", "_")
	ensure := func(args ...string) string {
		t.Helper()
		out, code := cli(t, bin, append([]string{"topic", "ensure", "--namesrv", tm.NameServer, "--timeout", "60s", "--queues", "2"}, args...)...)
		require.Equal(t, 0, code, out)
		return out
	}
	line := func(topic string, m testenv.Master, state string) string {
		return fmt.Sprintf("topic %s on %s (%s): %s\n", topic, m.Name, m.Addr, state)
	}

	both := "RMQGUARD_E2E_BOTH_" + run
	assert.Equal(t, line(both, tm.A, "created")+line(both, tm.B, "created"), ensure(both))
	route, err := rmq.TopicRoute(ctx, []string{tm.NameServer}, both)
	require.NoError(t, err)
	assert.Equal(t, []rmq.QueueData{
		{BrokerName: tm.A.Name, BrokerAddr: tm.A.Addr, ReadQueues: 2, WriteQueues: 2, Perm: 6},
		{BrokerName: tm.B.Name, BrokerAddr: tm.B.Addr, ReadQueues: 2, WriteQueues: 2, Perm: 6},
	}, route)
	assert.Equal(t, line(both, tm.A, "exists")+line(both, tm.B, "exists"), ensure(both))

	// The regression case: created on A, then a call naming B said "exists" and left B without queues.
	first := "RMQGUARD_E2E_FIRST_" + run
	assert.Equal(t, line(first, tm.A, "created"), ensure("--broker", tm.A.Addr, first))
	assert.Equal(t, line(first, tm.B, "created"), ensure("--broker", tm.B.Addr, first))
	assert.Equal(t, line(first, tm.A, "exists")+line(first, tm.B, "exists"), ensure(first))
	late := "RMQGUARD_E2E_LATE_" + run
	ensure("--broker", tm.A.Addr, late)
	assert.Equal(t, line(late, tm.A, "exists")+line(late, tm.B, "created"), ensure(late))

	// The library: topics.Ensure of the group topics (as the consumer's Start) on every master.
	res, err := topics.Ensure(ctx, topics.Cluster{NameServers: []string{tm.NameServer}}, topics.GroupTopics("rmqguard-e2e-"+run)...)
	require.NoError(t, err)
	require.Len(t, res, 2)
	for _, r := range res {
		assert.Equal(t, []topics.BrokerResult{{Broker: tm.A.Name, Addr: tm.A.Addr, State: "created"},
			{Broker: tm.B.Name, Addr: tm.B.Addr, State: "created"}}, r.Brokers, r.Topic)
	}
}

// dlqOnTwoMasters: a consumer whose handler fails permanently dead-letters one event from each master, and
// each broker keeps its letter in its own %DLQ%<group>. `dlq list` lists both with their broker, `dlq show`
// shows each, `dlq export` writes both, the census counts both as waiting; with the bug fixed `dlq replay`
// sends both and each event takes effect once; afterwards `dlq list` shows them replayed (when, by whom)
// and processed, the census counts none waiting, and a second replay sends nothing.
func dlqOnTwoMasters(t *testing.T, tm testenv.TwoMasters, bin string) {
	ns := []string{tm.NameServer}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	db := shoptest.MySQL(t)
	run := testenv.Unique("e2e-f42")
	topic, group := "RMQGUARD_E2E_"+strings.ReplaceAll(run, "-", "_"), "rmqguard-e2e-"+run
	_, err := topics.Ensure(ctx, topics.Cluster{NameServers: ns}, topics.Topic{Name: topic, Queues: 1})
	require.NoError(t, err)

	var bug atomic.Bool
	bug.Store(true)
	ledger := testenv.NewLedger(t, db, run)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	handler := testenv.Must(middleware.Chain(dedup.Handle(ledger.Handler(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		if bug.Load() {
			return consumer.Outcome{}, retry.Permanent(errors.New("bug: unknown SKU"))
		}
		return consumer.Processed(), nil
	})), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))))
	// WithDeadLetterSink(nil): the broker a message came from moves it to its own %DLQ%<group>.
	c, err := consumer.New(consumer.Config{NameServers: ns, Group: group, MaxAttempts: 2, DrainTimeout: 5 * time.Second,
		Subscriptions: []consumer.Subscription{{Topic: topic}}, StartFromFirstOffset: true},
		handler, consumer.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))), consumer.WithDeadLetterSink(nil))
	require.NoError(t, err)
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	for _, tp := range []string{rmq.RetryTopic(group), rmq.DLQTopic(group)} {
		route, err := rmq.TopicRoute(ctx, ns, tp)
		require.NoError(t, err)
		assert.Len(t, route, 2, "Start created %s on both masters", tp)
	}

	events := map[string]testenv.Master{run + "-on-a": tm.A, run + "-on-b": tm.B}
	sendTo(t, ctx, ns, topic, events)
	var letters []dlqtool.Letter
	require.Eventually(t, func() bool {
		res, err := dlqtool.Scan(ctx, topics.Cluster{NameServers: ns}, group, dlqtool.ScanOptions{})
		letters = res.Letters
		return err == nil && res.Complete && len(letters) == 2
	}, 60*time.Second, 200*time.Millisecond, "one letter on each master's DLQ")
	for _, l := range letters {
		assert.Equal(t, events[l.EventID].Name, l.Broker, "the letter of %s is on the master its message came from", l.EventID)
	}

	dsn := testenv.MySQLDSN()
	dlqCmd := func(sub string, args ...string) string {
		t.Helper()
		out, code := cli(t, bin, append([]string{"dlq", sub, "--namesrv", tm.NameServer, "--group", group}, args...)...)
		require.Equal(t, 0, code, out)
		return out
	}
	list := func() []listJSON {
		t.Helper()
		var rows []listJSON
		out := dlqCmd("list", "--mysql-dsn", dsn, "-o", "json")
		require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
		sort.Slice(rows, func(i, j int) bool { return rows[i].Broker < rows[j].Broker })
		return rows
	}

	rows := list()
	require.Len(t, rows, 2)
	for i, m := range []testenv.Master{tm.A, tm.B} {
		assert.Equal(t, m.Name, rows[i].Broker)
		assert.Equal(t, m, events[rows[i].EventID])
		assert.Equal(t, "not-replayed", rows[i].ReplayStatus)
		assert.Equal(t, false, *rows[i].Processed)
		out := dlqCmd("show", rows[i].MsgID)
		assert.Contains(t, out, "broker:         "+m.Name+"\n")
		assert.Contains(t, out, "event ID:       "+rows[i].EventID+"\n")
	}
	file := filepath.Join(t.TempDir(), "letters.jsonl")
	dlqCmd("export", "-o", file)
	f, err := os.Open(file)
	require.NoError(t, err)
	_, exported, err := dlqtool.ReadExportFile(f)
	_ = f.Close()
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{tm.A.Name, tm.B.Name}, []string{exported[0].Broker, exported[1].Broker})

	_, err = dlq.Migrate(ctx, db.DB)
	require.NoError(t, err)
	gauge := startMonitor(t, ctx, ns, group, db)
	census := func() dlqtool.Census {
		t.Helper()
		audit, err := dlqtool.NewMySQLAudit(db)
		require.NoError(t, err)
		processed, err := dlqtool.NewMySQLProcessed(db)
		require.NoError(t, err)
		c, err := dlqtool.TakeCensus(ctx, topics.Cluster{NameServers: ns}, dlqtool.ScanOptions{},
			dlqtool.StatusOptions{Group: group, Audit: audit, Processed: processed})
		require.NoError(t, err)
		return c
	}
	assert.Equal(t, dlqtool.Census{Letters: 2, ByBroker: map[string]int{tm.A.Name: 1, tm.B.Name: 1}, Waiting: 2,
		WaitingByBroker: map[string]int{tm.A.Name: 1, tm.B.Name: 1}}, census())
	require.Eventually(t, func() bool { return gauge() == 2 }, 30*time.Second, 100*time.Millisecond, "rmqguard_dlq_letters_waiting")

	bug.Store(false)
	out := dlqCmd("replay", "--mysql-dsn", dsn, "--yes", "--operator", "f42-operator", "-v")
	t.Logf("replay:\n%s", out)
	assert.Contains(t, out, "selected 2, sent 2, would send 0, skipped: already replayed 0, uncertain 0, already processed 0, no origin 0; failed 0")
	for id, m := range events {
		assert.Regexp(t, `sent +dlq=\S+ broker=`+m.Name+` event=`+id+` topic=`+topic, out)
		require.Eventually(t, func() bool { return ledger.Count(t, id) == 1 }, 60*time.Second, 100*time.Millisecond, "the replay of %s takes effect", id)
	}

	rows = list()
	require.Len(t, rows, 2)
	for _, r := range rows {
		assert.Equal(t, "sent", r.ReplayStatus, r.EventID)
		assert.Equal(t, "f42-operator", r.ReplayedBy)
		require.NotNil(t, r.ReplayedAt)
		assert.WithinDuration(t, time.Now(), *r.ReplayedAt, 2*time.Minute)
		assert.Equal(t, true, *r.Processed, "processed since the replay: %s", r.EventID)
	}
	table := dlqCmd("list", "--mysql-dsn", dsn)
	assert.Regexp(t, `\s`+tm.A.Name+`\s.*\s20\d\d-\S+Z by f42-operator\s+yes\n`, table)
	assert.Regexp(t, `\s`+tm.B.Name+`\s.*\s20\d\d-\S+Z by f42-operator\s+yes\n`, table)
	assert.Equal(t, dlqtool.Census{Letters: 2, ByBroker: map[string]int{tm.A.Name: 1, tm.B.Name: 1}, Waiting: 0,
		WaitingByBroker: map[string]int{tm.A.Name: 0, tm.B.Name: 0}}, census())
	require.Eventually(t, func() bool { return gauge() == 0 }, 30*time.Second, 100*time.Millisecond, "rmqguard_dlq_letters_waiting")

	out = dlqCmd("replay", "--mysql-dsn", dsn, "--yes")
	assert.Contains(t, out, "selected 2, sent 0, would send 0, skipped: already replayed 2,")
	time.Sleep(2 * time.Second) // a further delivery, if any had been sent, arrives within this
	ledger.RequireOncePerEvent(t, 2)
}

// listJSON is a row of `dlq list -o json`, as a script reads it.
type listJSON struct {
	MsgID        string     `json:"msg_id"`
	Broker       string     `json:"broker"`
	EventID      string     `json:"event_id"`
	ReplayStatus string     `json:"replay_status"`
	ReplayedAt   *time.Time `json:"replayed_at"`
	ReplayedBy   string     `json:"replayed_by"`
	Processed    *bool      `json:"processed"`
}

// sendTo sends one message per event ID to topic's queue 0 on the master given for it.
func sendTo(t *testing.T, ctx context.Context, ns []string, topic string, events map[string]testenv.Master) {
	t.Helper()
	p, err := rocketmq.NewProducer(producer.WithNsResolver(primitive.NewPassthroughResolver(ns)),
		producer.WithGroupName(topic+"-producer"), producer.WithInstanceName(testenv.Unique("f42-producer")),
		producer.WithQueueSelector(producer.NewManualQueueSelector()))
	require.NoError(t, err)
	require.NoError(t, p.Start())
	defer func() { _ = p.Shutdown() }()
	for id, m := range events {
		msg := primitive.NewMessage(topic, []byte(`{}`))
		msg.WithProperty("EVENT_ID", id)
		msg.Queue = &primitive.MessageQueue{Topic: topic, BrokerName: m.Name, QueueId: 0}
		res, err := p.SendSync(ctx, msg)
		require.NoError(t, err)
		require.Equal(t, primitive.SendOK, res.Status)
		require.Equal(t, m.Name, res.MessageQueue.BrokerName)
	}
}

// startMonitor runs a dlq.Monitor of group every 500 ms until the test ends and returns a reader of its
// gauge (-1 while it has no value).
func startMonitor(t *testing.T, ctx context.Context, ns []string, group string, db *sqlx.DB) func() float64 {
	t.Helper()
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	mon, err := dlq.NewMonitor(dlq.MonitorConfig{Cluster: topics.Cluster{NameServers: ns}, Group: group, DB: db,
		Interval: 500 * time.Millisecond, Metrics: m, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = mon.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return func() float64 {
		if testutil.CollectAndCount(m.DLQLettersWaiting) == 0 {
			return -1
		}
		return testutil.ToFloat64(m.DLQLettersWaiting.WithLabelValues(group))
	}
}
