package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/outboxadmin"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/outbox"
)

// sendEach returns a handler that records one outbox message per event: name "credited", to topic, with
// the event's body and the sharding key of keyOf(event ID).
func sendEach(ob *outbox.Outbox, topic string, keyOf func(string) string) func(ctx context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
	return func(ctx context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		_, err := ob.Send(ctx, d, outbox.Message{Name: "credited", Topic: topic, Tag: "Credited",
			Body: []byte(d.EventID), ShardingKey: keyOf(d.EventID)})
		if err != nil {
			return consumer.Outcome{}, err
		}
		return consumer.Processed(), nil
	}
}

// deliverEvents delivers events <run>-<key>-<seq> for keys × perKey, key by key in sequence order
// interleaved (seq 0 of every key, then seq 1, ...), and requires each to be acknowledged.
func deliverEvents(t *testing.T, up *testenv.Callback, run string, keys, perKey int) []string {
	t.Helper()
	var ids []string
	for s := 0; s < perKey; s++ {
		for k := 0; k < keys; k++ {
			id := fmt.Sprintf("%s-k%d-%03d", run, k, s)
			require.Equal(t, rmq.ConsumeSuccess, up.Deliver(t, false, upMsg(id, 0)), id)
			ids = append(ids, id)
		}
	}
	return ids
}

// keyOfEvent is the aggregate of an event of deliverEvents: its "-k<n>-" part.
func keyOfEvent(id string) string {
	parts := strings.Split(id, "-")
	return parts[len(parts)-2]
}

// requireOnceInKeyOrder requires that every event of ids was applied downstream exactly once (ledger),
// under its derived event ID, and that the applies of each key came in sequence order.
func requireOnceInKeyOrder(t *testing.T, f *fixture, ds *downstream, ids []string) {
	t.Helper()
	applied := ds.waitApplied(t, len(ids), 90*time.Second)
	scope := "up-" + f.run
	for _, id := range ids {
		require.Equal(t, 1, ds.ledger.Count(t, outboxsql.EventID(scope, id, "credited")), "downstream applies of %s", id)
	}
	last := map[string]string{}
	for _, g := range applied {
		k := keyOfEvent(g.Body)
		require.Greater(t, g.Body, last[k], "key %s: %s applied after %s", k, g.Body, last[k])
		last[k] = g.Body
	}
}

// F29: the handler records an outbox message and then fails: its transaction rolls back and nothing is
// ever sent; the retry that succeeds sends it, and the downstream group applies it once.
func TestOutbox_RolledBackWithItsTransactionIsNeverSentAndTheRetrySendsOnce(t *testing.T) {
	f := newFixture(t)
	ob := f.outbox(outbox.Config{})
	f.relay(ob)
	ds := f.downstream()
	send := sendEach(ob, f.topic, func(string) string { return "" })
	up := f.upstream(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if _, err := send(ctx, tx, d); err != nil {
			return consumer.Outcome{}, err
		}
		if d.Attempt == 0 {
			return consumer.Outcome{}, errors.New("the business write fails after the outbox add")
		}
		return consumer.Processed(), nil
	})
	id := f.run + "-paid"
	res := up.Deliver(t, false, upMsg(id, 0))
	require.Equal(t, rmq.ConsumeRetryLater, res, "%+v", up.Decisions(id+"-msg"))
	time.Sleep(time.Second) // the relay polls every 200 ms: time enough to send a row if one were there
	require.Zero(t, f.count(outboxsql.StatusPending)+f.count(outboxsql.StatusSent)+f.count(outboxsql.StatusParked), "rows after the rollback")

	require.Equal(t, rmq.ConsumeSuccess, up.Deliver(t, false, upMsg(id, 1)))
	require.Equal(t, rmq.ConsumeSuccess, up.Deliver(t, false, upMsg(id, 2)), "a later duplicate is acknowledged")
	applied := ds.waitApplied(t, 1, 60*time.Second)
	want := outboxsql.EventID("up-"+f.run, id, "credited")
	require.Equal(t, want, applied[0].EventID, "the message carries the derived event ID")
	time.Sleep(2 * time.Second)
	require.Equal(t, 1, f.count(outboxsql.StatusSent))
	require.Equal(t, 1, ds.ledger.Count(t, want))
	require.Len(t, ds.snapshot(), 1, "applied downstream")
}

// F30 (simulated crash): rows committed while no relay ran — the consumer was killed after COMMIT,
// before its relay sent them — are sent by the relay of the next process, and applied downstream once
// under their derived event IDs. A real kill -9 leaves the same state: the rows are in the table,
// pending, and nothing holds their locks.
func TestOutboxRelay_RowsCommittedBeforeACrashAreSentByTheNextRelay(t *testing.T) {
	f := newFixture(t)
	crashed := f.outbox(outbox.Config{}) // its Run never starts: the process died after COMMIT
	up := f.upstream(sendEach(crashed, f.topic, keyOfEvent))
	ids := deliverEvents(t, up, f.run, 3, 5)
	require.Equal(t, len(ids), f.count(outboxsql.StatusPending))

	ds := f.downstream()
	f.relay(f.outbox(outbox.Config{})) // the restarted process
	requireOnceInKeyOrder(t, f, ds, ids)
	require.Eventually(t, func() bool { return f.count(outboxsql.StatusSent) == len(ids) }, 10*time.Second, 100*time.Millisecond)
}

// F32: two relays (two Outboxes, each with its own producer, as in two processes) on one table: every
// row is sent, each event is applied downstream once, and each key's rows arrive in commit order.
func TestOutboxRelay_TwoRelaysOnOneTableSendEachRowAndDownstreamAppliesItOnce(t *testing.T) {
	f := newFixture(t)
	writer := f.outbox(outbox.Config{})
	up := f.upstream(sendEach(writer, f.topic, keyOfEvent))
	ids := deliverEvents(t, up, f.run, 8, 25)
	ds := f.downstream()
	f.relay(f.outbox(outbox.Config{}))
	f.relay(f.outbox(outbox.Config{}))
	requireOnceInKeyOrder(t, f, ds, ids)
	require.Eventually(t, func() bool { return f.count(outboxsql.StatusSent) == len(ids) }, 10*time.Second, 100*time.Millisecond)
	var maxAttempts int
	require.NoError(t, f.db.Get(&maxAttempts, "SELECT MAX(attempts) FROM "+f.prefix+outboxsql.Table))
	require.Equal(t, 1, maxAttempts, "every row sent by one SEND_OK, none twice")
}

// F31: while the broker cannot be reached, committed rows wait — none is lost or parked — and the relay
// backs off instead of looping; once it can be reached, every row goes out, each key's in commit order.
// The unreachable cluster is a name server address nobody listens on (the shared broker is never
// stopped).
func TestOutboxRelay_BrokerUnreachableRowsWaitWithBackoffThenGoOutInKeyOrder(t *testing.T) {
	f := newFixture(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := l.Addr().String()
	require.NoError(t, l.Close())

	m, err := metrics.NewOutbox(prometheus.NewRegistry())
	require.NoError(t, err)
	down := f.outbox(outbox.Config{NameServers: []string{dead}, MaxBackoff: time.Second, Observer: m})
	up := f.upstream(sendEach(down, f.topic, keyOfEvent))
	stopDown := f.relay(down)
	ids := deliverEvents(t, up, f.run, 5, 10)
	time.Sleep(4 * time.Second)
	require.Equal(t, float64(len(ids)), testutil.ToFloat64(m.Pending), "pending-rows gauge while the broker is down")
	require.Greater(t, testutil.ToFloat64(m.OldestAge), 1.0, "oldest pending age grows")
	require.Zero(t, testutil.ToFloat64(m.Sent.WithLabelValues(f.topic)))
	stopDown()
	require.Equal(t, len(ids), f.count(outboxsql.StatusPending), "every row still pending")
	var tried, attempts int
	require.NoError(t, f.db.Get(&tried, "SELECT COUNT(*) FROM "+f.prefix+outboxsql.Table+" WHERE attempts > 0"))
	require.NoError(t, f.db.Get(&attempts, "SELECT COALESCE(SUM(attempts), 0) FROM "+f.prefix+outboxsql.Table))
	t.Logf("broker unreachable for 4 s: %d send attempts on %d rows", attempts, tried)
	require.Positive(t, attempts, "the relay tried")
	require.LessOrEqual(t, attempts, 12, "backoff: no hot loop (100 ms doubling to 1 s over 4 s, one row per round)")

	ds := f.downstream()
	m2, err := metrics.NewOutbox(prometheus.NewRegistry())
	require.NoError(t, err)
	f.relay(f.outbox(outbox.Config{Observer: m2}))
	requireOnceInKeyOrder(t, f, ds, ids)
	require.Equal(t, float64(len(ids)), testutil.ToFloat64(m2.Sent.WithLabelValues(f.topic)))
	require.Eventually(t, func() bool { return testutil.ToFloat64(m2.Pending) == 0 }, 5*time.Second, 100*time.Millisecond, "the gauge falls")
}

// F33: a row for a topic that does not exist is parked with its reason and listed; the rows of other
// keys go out meanwhile, the later row of its own key waits behind it; after the topic is created,
// Retry sends it and then the row behind it.
func TestOutboxRelay_RowForAMissingTopicIsParkedOthersGoOnAndRetrySendsItAfterTheFix(t *testing.T) {
	f := newFixture(t)
	missing := f.topic + "_LATER"
	ob := f.outbox(outbox.Config{})
	up := f.upstream(func(ctx context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		topic := f.topic
		if strings.HasSuffix(d.EventID, "-kA-000") {
			topic = missing
		}
		_, err := ob.Send(ctx, d, outbox.Message{Name: "credited", Topic: topic, Body: []byte(d.EventID), ShardingKey: keyOfEvent(d.EventID)})
		return consumer.Processed(), err
	})
	var ids []string
	for _, id := range []string{"kA-000", "kA-001", "kB-000", "kB-001", "kB-002"} {
		ids = append(ids, f.run+"-"+id)
		require.Equal(t, rmq.ConsumeSuccess, up.Deliver(t, false, upMsg(f.run+"-"+id, 0)))
	}
	ds := f.downstream()
	f.relay(ob)
	ds.waitApplied(t, 3, 60*time.Second)
	for _, g := range ds.snapshot() {
		require.Contains(t, g.Body, "-kB-", "only key B went out")
	}
	require.Eventually(t, func() bool { return f.count(outboxsql.StatusParked) == 1 }, 20*time.Second, 100*time.Millisecond)
	parked, err := outboxadmin.List(f.ctx, f.db, f.prefix, outboxsql.StatusParked, 10)
	require.NoError(t, err)
	require.Len(t, parked, 1)
	require.Equal(t, f.run+"-kA-000", parked[0].SourceEventID)
	require.Contains(t, parked[0].LastError, missing, "the reason names the topic")
	require.Equal(t, 1, f.count(outboxsql.StatusPending), "kA-001 waits behind the parked row")

	require.NoError(t, irmq.EnsureTopic(f.ctx, f.ns, testenv.Broker(t), missing, 4))
	n, err := outboxadmin.Retry(f.ctx, f.db, f.prefix)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Eventually(t, func() bool { return f.count(outboxsql.StatusSent) == len(ids) }, 60*time.Second, 200*time.Millisecond)
	ds.waitApplied(t, 4, 30*time.Second) // kA-001, on the fixture's topic, after kA-000 was sent
	var order []string
	require.NoError(t, f.db.Select(&order, "SELECT source_event_id FROM "+f.prefix+outboxsql.Table+" ORDER BY sent_at, id"))
	require.Less(t, indexOf(order, f.run+"-kA-000"), indexOf(order, f.run+"-kA-001"), "kA-000 sent before kA-001: %v", order)
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// The default wiring: the relay runs in the consumer's process (consumer.WithBackground(ob.Run)), woken
// by each commit, so a row goes out soon after its transaction commits, not at the next poll (the poll
// here is 10 s); the downstream group applies each event once.
func TestOutbox_RelayInTheConsumerProcessSendsSoonAfterTheCommit(t *testing.T) {
	f := newFixture(t)
	ob := f.outbox(outbox.Config{PollInterval: 10 * time.Second})
	ds := f.downstream()
	inTopic := f.topic + "_IN"
	require.NoError(t, irmq.EnsureTopic(f.ctx, f.ns, testenv.Broker(t), inTopic, 4))
	group := "up-" + f.run
	require.NoError(t, irmq.EnsureGroupTopics(f.ctx, f.ns, testenv.Broker(t), group))
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	chain := testenv.Must(middleware.Chain(dedup.Handle(sendEach(ob, f.topic, keyOfEvent)), middleware.Recover(zap.NewNop()),
		middleware.Classify(), eventID, middleware.Deadline(0), testenv.Must(middleware.Dedup(f.store))))
	c, err := consumer.New(consumer.Config{NameServers: f.ns, Group: group, InstanceName: group,
		Subscriptions: []consumer.Subscription{{Topic: inTopic}}, StartFromFirstOffset: true},
		chain, consumer.WithBackground(ob.Run))
	require.NoError(t, err)
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })

	prod, err := irmq.StartProducer(f.ns, group+"-producer")
	require.NoError(t, err)
	t.Cleanup(func() { _ = prod.Shutdown() })
	var ids []string
	for s := 0; s < 25; s++ {
		for k := 0; k < 4; k++ {
			id := fmt.Sprintf("%s-k%d-%03d", f.run, k, s)
			msg := primitive.NewMessage(inTopic, []byte(id))
			msg.WithProperty("EVENT_ID", id)
			res, err := prod.SendSync(f.ctx, msg)
			require.NoError(t, err)
			require.Equal(t, primitive.SendOK, res.Status)
			ids = append(ids, id)
		}
	}
	applied := ds.waitApplied(t, len(ids), 90*time.Second)
	scope := group
	for _, id := range ids {
		require.Equal(t, 1, ds.ledger.Count(t, outboxsql.EventID(scope, id, "credited")), id)
	}
	require.Len(t, applied, len(ids))
	var lat []float64
	require.NoError(t, f.db.Select(&lat, "SELECT TIMESTAMPDIFF(MICROSECOND, created_at, sent_at) / 1000 FROM "+
		f.prefix+outboxsql.Table+" WHERE status = 'sent' ORDER BY 1"))
	require.Len(t, lat, len(ids))
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("insert-to-SEND_OK (ms) over %d rows: p50 %.1f p99 %.1f max %.1f", len(lat), p50, p99, lat[len(lat)-1])
	require.Less(t, p99, 5000.0, "woken by the commit, not by the 10 s poll")
}
