package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// table is one test's own outbox table (a unique prefix) and an Outbox on it.
type table struct {
	db *sqlx.DB
	t  string
}

func newTable(t testing.TB, cfg Config) (*table, *Outbox) {
	t.Helper()
	db := testenv.MySQL(t)
	prefix := "obi" + strings.ReplaceAll(strings.TrimPrefix(testenv.Unique("obi"), "obi-"), "-", "_") + "_"
	err := dedupsql.CheckPrefix(prefix)
	require.NoError(t, err)
	_, err = dedup.Migrate(context.Background(), db.DB, dedup.WithTablePrefix(prefix))
	require.NoError(t, err)
	_, err = Migrate(context.Background(), db.DB, prefix)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, tb := range append(dedupsql.Names(prefix), prefix+outboxsql.Table, prefix+outboxsql.VersionTable) {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tb)
		}
	})
	store, err := dedup.NewStore(db, dedup.WithTablePrefix(prefix))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	o, err := New(store, cfg)
	require.NoError(t, err)
	return &table{db: db, t: prefix + outboxsql.Table}, o
}

// add inserts a committed pending row (as Send or Do after COMMIT) and returns its id.
func (tb *table) add(t *testing.T, o *Outbox, kind, name, key string) int64 {
	t.Helper()
	res, err := tb.db.Exec(o.q.insert, kind, "scope/ev/"+name, "ev", "scope", name, key, "T", "", "", nil, []byte(name))
	require.NoError(t, err)
	id, err := res.LastInsertId()
	require.NoError(t, err)
	return id
}

func (tb *table) status(t *testing.T, id int64) (status string, attempts int) {
	t.Helper()
	var r struct {
		Status   string `db:"status"`
		Attempts int    `db:"attempts"`
	}
	require.NoError(t, tb.db.Get(&r, "SELECT status, attempts FROM "+tb.t+" WHERE id = ?", id))
	return r.Status, r.Attempts
}

// fakeSender answers SEND_OK, or what next says (when set), and records the messages it was given: their
// bodies in sent, in the order of the calls, and each call's messages in calls.
type fakeSender struct {
	mu    sync.Mutex
	sent  []string
	calls [][]*primitive.Message
	next  func(n int, msgs []*primitive.Message) error // n: 1 for the first call
}

func (s *fakeSender) SendSync(_ context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, msgs)
	for _, m := range msgs {
		s.sent = append(s.sent, string(m.Body))
	}
	if s.next != nil {
		if err := s.next(len(s.calls), msgs); err != nil {
			return nil, err
		}
	}
	return &primitive.SendResult{Status: primitive.SendOK}, nil
}

// count is how many messages the sender was given.
func (s *fakeSender) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

// runRelay runs o.run with s, each message alone, until the test ends (or the returned stop).
func runRelay(t *testing.T, o *Outbox, s sender) (stop func() time.Duration) {
	return runRelayWith(t, o, s, nil)
}

// runRelayWith runs o.run with s and rt until the test ends (or the returned stop).
func runRelayWith(t *testing.T, o *Outbox, s sender, rt router) (stop func() time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.run(ctx, s, rt) }()
	var once sync.Once
	var took time.Duration
	stop = func() time.Duration {
		once.Do(func() {
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("run did not return 10 s after its context ended")
			}
			took = time.Since(start)
		})
		return took
	}
	t.Cleanup(func() { stop() })
	return stop
}

// A relay stopped in the middle of a round (Shutdown after the drain) records the rows it already had
// SEND_OK for: they are not sent again by the next start; the row whose send the stop cut stays pending,
// with no attempt spent. A round's heads go out concurrently after the first, so which rows the sender saw
// before the stop varies: each row's status must match the answer the sender gave for it.
func TestRelay_StoppedMidRoundRecordsTheRowsAlreadySent(t *testing.T) {
	tb, o := newTable(t, Config{PollInterval: time.Hour})
	keys := []string{"a", "b", "c", "d"}
	var ids []int64
	for _, k := range keys {
		ids = append(ids, tb.add(t, o, outboxsql.KindMessage, "m-"+k, k))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &fakeSender{next: func(n int, _ []*primitive.Message) error {
		if n == 3 {
			cancel() // Shutdown while the third send is in flight
			return context.Canceled
		}
		return nil
	}}
	require.NoError(t, o.run(ctx, s, nil))
	s.mu.Lock()
	seen := append([]string(nil), s.sent...)
	s.mu.Unlock()
	require.GreaterOrEqual(t, len(seen), 3, "the stop came with the third send")
	answer := map[string]string{} // body → the status its answer must leave
	for i, body := range seen {
		answer[body] = outboxsql.StatusSent
		if i == 2 {
			answer[body] = outboxsql.StatusPending // the send the stop cut
		}
	}
	for i, k := range keys {
		want, ok := answer["m-"+k]
		if !ok {
			want = outboxsql.StatusPending // never sent: the stop came first
		}
		st, attempts := tb.status(t, ids[i])
		require.Equal(t, want, st, "row %s (sender saw %v)", k, seen)
		if st == outboxsql.StatusPending {
			require.Zero(t, attempts, "row %s: a send cut by the stop spends no attempt", k)
		}
	}
}

// A durable effect whose receiver fails backs off that effect's row only: a message committed meanwhile
// is sent as soon as its commit wakes the relay, not after the effect's back-off.
func TestRelay_FailingEffectDoesNotDelayMessages(t *testing.T) {
	var runs sync.WaitGroup
	runs.Add(5)
	var mu sync.Mutex
	n := 0
	tb, o := newTable(t, Config{PollInterval: time.Hour, MaxBackoff: 3 * time.Second, MaxEffectAttempts: 100,
		Effects: map[string]EffectFunc{"notify": func(context.Context, Effect) error {
			mu.Lock()
			defer mu.Unlock()
			if n++; n <= 5 {
				runs.Done()
			}
			return errors.New("receiver down")
		}}})
	tb.add(t, o, outboxsql.KindEffect, "notify", "fx")
	s := &fakeSender{}
	runRelay(t, o, s)
	o.wakeRelay()
	runs.Wait() // 5 failed runs: the effect's wait is now 1.6 s, then 3 s
	id := tb.add(t, o, outboxsql.KindMessage, "m", "k")
	start := time.Now()
	o.wakeRelay()
	require.Eventually(t, func() bool { st, _ := tb.status(t, id); return st == outboxsql.StatusSent }, 5*time.Second, 20*time.Millisecond)
	require.Less(t, time.Since(start), time.Second, "the message waited for the effect's back-off")
}

// An effect that ignores its context is abandoned at EffectTimeout: the relay goes on with the other
// rows and stops when asked, and the row is tried again later.
func TestRelay_EffectIgnoringItsContextIsAbandonedAtEffectTimeout(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	tb, o := newTable(t, Config{PollInterval: 100 * time.Millisecond, EffectTimeout: 300 * time.Millisecond,
		Effects: map[string]EffectFunc{"hang": func(context.Context, Effect) error { <-release; return nil }}})
	fx := tb.add(t, o, outboxsql.KindEffect, "hang", "fx")
	msg := tb.add(t, o, outboxsql.KindMessage, "m", "k")
	stop := runRelay(t, o, &fakeSender{})
	require.Eventually(t, func() bool { st, _ := tb.status(t, msg); return st == outboxsql.StatusSent }, 3*time.Second, 20*time.Millisecond,
		"a message behind a hanging effect")
	require.Eventually(t, func() bool { st, n := tb.status(t, fx); return st == outboxsql.StatusPending && n >= 1 }, 3*time.Second, 20*time.Millisecond)
	require.Less(t, stop(), 2*time.Second, "Run returns while the effect still hangs")
}

// Derived event IDs of different (scope, event ID, name) never collide, also when a scope and an event
// ID contain '/' (dedup.WithScope allows it), and fit the dedup event-ID column.
func TestEventID_DistinctPartsNeverCollide(t *testing.T) {
	long := strings.Repeat("x", dedupsql.MaxEventIDLength)
	cases := [][3]string{
		{"a/b", "c", "n"}, {"a", "b/c", "n"}, {"a", "b", "c"},
		{"g", "e", "n"}, {"g", "e", "n2"}, {"g2", "e", "n"},
		{"g", long, "n"}, {"g", long + "y", "n"}, {"g/" + long, "e", "n"}, {"g", long[2:] + "/e", "n"},
	}
	seen := map[string][3]string{}
	for _, c := range cases {
		id := outboxsql.EventID(c[0], c[1], c[2])
		require.LessOrEqual(t, len([]rune(id)), dedupsql.MaxEventIDLength, "%v", c)
		prev, dup := seen[id]
		require.False(t, dup, "%v and %v both derive %q", prev, c, id)
		seen[id] = c
		require.Equal(t, id, outboxsql.EventID(c[0], c[1], c[2]), "stable")
	}
	require.Equal(t, "g/e/n", outboxsql.EventID("g", "e", "n"), "readable when short and the scope has no '/'")
}

// A sharding key longer than the column keeps its meaning: the rows of one long key share a key (one
// queue, in order), and two long keys with a common 128-character prefix do not.
func TestSend_LongShardingKeyStillOrdersItsRows(t *testing.T) {
	tb, o := newTable(t, Config{})
	long := strings.Repeat("aggregate-", 20)
	keys := map[string]string{}
	for i, k := range []string{long + "1", long + "1", long + "2"} {
		tx, err := tb.db.Beginx()
		require.NoError(t, err)
		d := &consumer.Delivery{EventID: "ev-" + strconv.Itoa(i), Group: "g"}
		_, err = o.Send(testenv.WithTx(context.Background(), tx), d, Message{Name: "m", Topic: "T", ShardingKey: k})
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		var got string
		require.NoError(t, tb.db.Get(&got, "SELECT sharding_key FROM "+tb.t+" WHERE source_event_id = ?", d.EventID))
		keys[d.EventID] = got
	}
	require.Equal(t, keys["ev-0"], keys["ev-1"], "one long key, one sharding key")
	require.NotEqual(t, keys["ev-1"], keys["ev-2"], "two long keys")
}

// fixedRoute is a router whose every topic has n queues on broker "b".
type fixedRoute int

func (n fixedRoute) queues(_ context.Context, topic string) ([]*primitive.MessageQueue, error) {
	qs := make([]*primitive.MessageQueue, n)
	for i := range qs {
		qs[i] = &primitive.MessageQueue{Topic: topic, BrokerName: "b", QueueId: i}
	}
	return qs, nil
}

func (fixedRoute) forget(string) {}

// queueOf picks, for every sharding key, the queue the client's hash selector picks for a message with
// that key: a relay that batches sends each key's rows where one that sends them alone would.
func TestQueueOf_SameQueueAsTheClientsHashSelector(t *testing.T) {
	qs, _ := fixedRoute(7).queues(context.Background(), "T")
	hash := producer.NewHashQueueSelector()
	for i := range 500 {
		key := "O-" + strconv.Itoa(i*7919)
		m := primitive.NewMessage("T", nil)
		m.WithShardingKey(key)
		require.Same(t, hash.Select(m, qs, ""), queueOf(key, qs), "key %s", key)
	}
}

// The relay's selector sends a message to the queue the relay chose, found in the client's route; a
// batch whose queue the route lacks is not sent anywhere else (its rows' order lives in that queue); a
// message without a chosen queue goes by its sharding key.
func TestQueueSelector_HonoursTheRelaysQueue(t *testing.T) {
	qs, _ := fixedRoute(4).queues(context.Background(), "T")
	sel := newQueueSelector()
	m := primitive.NewMessage("T", nil)
	m.Queue = &primitive.MessageQueue{Topic: "T", BrokerName: "b", QueueId: 2}
	require.Same(t, qs[2], sel.Select(m, qs, ""))
	batch := &primitive.Message{Topic: "T", Batch: true, Queue: &primitive.MessageQueue{Topic: "T", BrokerName: "gone", QueueId: 2}}
	require.Nil(t, sel.Select(batch, qs, ""), "a batch for a queue the route lacks")
	byKey := primitive.NewMessage("T", nil)
	byKey.WithShardingKey("O-42")
	require.Same(t, queueOf("O-42", qs), sel.Select(byKey, qs, ""))
	byKey.Queue = batch.Queue
	require.Same(t, queueOf("O-42", qs), sel.Select(byKey, qs, ""), "one message for a queue the route lacks goes by its key")
}

// A round's messages go in one SendSync per queue, each batch to the queue of its rows' sharding keys (the
// one the client's hash selector picks), its rows in id order; every row is sent once and marked sent.
func TestRelay_BatchesARoundsMessagesOneSendPerQueue(t *testing.T) {
	tb, o := newTable(t, Config{PollInterval: time.Hour})
	const rows = 40
	var ids []int64
	for i := range rows {
		ids = append(ids, tb.add(t, o, outboxsql.KindMessage, "m-"+strconv.Itoa(i), "key-"+strconv.Itoa(i)))
	}
	s := &fakeSender{}
	runRelayWith(t, o, s, fixedRoute(4))
	o.wakeRelay()
	require.Eventually(t, func() bool { st, _ := tb.status(t, ids[rows-1]); return st == outboxsql.StatusSent }, 5*time.Second, 10*time.Millisecond)
	for _, id := range ids {
		st, attempts := tb.status(t, id)
		require.Equal(t, outboxsql.StatusSent, st, "row %d", id)
		require.Equal(t, 1, attempts, "row %d", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.sent, rows, "each row once")
	require.Len(t, s.calls, 4, "one send per queue (the round claims all 40)")
	qs, _ := fixedRoute(4).queues(context.Background(), "T")
	for _, call := range s.calls {
		require.NotNil(t, call[0].Queue, "the relay chose the batch's queue")
		last := -1
		for _, m := range call {
			require.Equal(t, call[0].Queue.QueueId, queueOf(m.GetShardingKey(), qs).QueueId, "row %s", m.Body)
			n, err := strconv.Atoi(strings.TrimPrefix(string(m.Body), "m-"))
			require.NoError(t, err)
			require.Greater(t, n, last, "id order in the batch")
			last = n
			require.NotEmpty(t, m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex), "each message of a batch has its own message ID")
		}
	}
}

// The broker refuses a batch because of one message in it (MESSAGE_ILLEGAL): the batch is sent again row
// by row, that row is parked with the broker's reason, and the other rows of the batch are sent. A row
// whose body is above the broker's default limit is parked without a send.
func TestRelay_RefusedBatchParksOnlyTheRowAtFault(t *testing.T) {
	tb, o := newTable(t, Config{PollInterval: time.Hour})
	var ids []int64
	for i := range 12 {
		ids = append(ids, tb.add(t, o, outboxsql.KindMessage, "m-"+strconv.Itoa(i), "key-"+strconv.Itoa(i)))
	}
	bad := ids[5]
	huge := tb.add(t, o, outboxsql.KindMessage, "huge", "key-huge")
	_, err := tb.db.Exec("UPDATE "+tb.t+" SET body = ? WHERE id = ?", make([]byte, maxMessageSize+1), huge)
	require.NoError(t, err)
	refusal := primitive.MQBrokerErr{ResponseCode: codeMessageIllegal, ErrorMessage: "the message is illegal"}
	s := &fakeSender{next: func(_ int, msgs []*primitive.Message) error {
		for _, m := range msgs {
			if string(m.Body) == "m-5" {
				return refusal
			}
		}
		return nil
	}}
	runRelayWith(t, o, s, fixedRoute(2))
	o.wakeRelay()
	require.Eventually(t, func() bool { st, _ := tb.status(t, ids[len(ids)-1]); return st == outboxsql.StatusSent }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { st, _ := tb.status(t, huge); return st == outboxsql.StatusParked }, 5*time.Second, 10*time.Millisecond)
	for _, id := range ids {
		st, attempts := tb.status(t, id)
		if id == bad {
			require.Equal(t, outboxsql.StatusParked, st)
			require.Equal(t, 1, attempts)
			continue
		}
		require.Equal(t, outboxsql.StatusSent, st, "row %d", id)
		require.Equal(t, 1, attempts, "row %d: sent once", id)
	}
	var reasons []string
	require.NoError(t, tb.db.Select(&reasons, "SELECT last_error FROM "+tb.t+" WHERE status = 'parked' ORDER BY id"))
	require.Len(t, reasons, 2)
	require.Contains(t, reasons[0], "the message is illegal")
	require.Contains(t, reasons[1], "maxMessageSize")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, body := range s.sent {
		require.NotEqual(t, maxMessageSize+1, len(body), "the huge row was sent")
	}
}

// Per sharding key the rows go out in id order and to one queue, across the batches of many rounds and
// with two relays on the table: a key's next row is claimed only after its previous one's batch had
// SEND_OK and was recorded.
func TestRelay_EachKeysRowsGoOutInIdOrderToOneQueueAcrossBatches(t *testing.T) {
	tb, o := newTable(t, Config{PollInterval: 50 * time.Millisecond})
	const keys, perKey = 8, 30
	var want []int64
	for seq := range perKey {
		for k := range keys {
			want = append(want, tb.add(t, o, outboxsql.KindMessage, fmt.Sprintf("k%d-%03d", k, seq), "key-"+strconv.Itoa(k)))
		}
	}
	s := &fakeSender{}
	other, err := New(o.store, Config{PollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	runRelayWith(t, o, s, fixedRoute(4))
	runRelayWith(t, other, s, fixedRoute(4))
	o.wakeRelay()
	other.wakeRelay()
	require.Eventually(t, func() bool {
		var pending int
		require.NoError(t, tb.db.Get(&pending, "SELECT COUNT(*) FROM "+tb.t+" WHERE status <> 'sent'"))
		return pending == 0
	}, 20*time.Second, 20*time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.sent, keys*perKey, "each row once")
	last := map[string]string{}
	queue := map[string]int{}
	batches := 0
	for _, call := range s.calls {
		if len(call) > 1 {
			batches++
		}
		for _, m := range call {
			body, key := string(m.Body), m.GetShardingKey()
			require.Greater(t, body, last[key], "key %s: %s after %s", key, body, last[key])
			last[key] = body
			if q, ok := queue[key]; ok {
				require.Equal(t, q, m.Queue.QueueId, "key %s changed queue", key)
			}
			queue[key] = m.Queue.QueueId
		}
	}
	require.Positive(t, batches, "some rounds sent batches")
}

// The relay's routes list a topic's writable queues as the client does (broker by broker, queue ids in
// order); a topic the name server does not know gives an error and no queues (its messages then go
// alone), and a failed lookup keeps the last list known.
func TestRoutes_ListTheTopicsQueuesAndKeepTheLastOnAFailedLookup(t *testing.T) {
	ns := testenv.NameServer(t)
	ctx := context.Background()
	topic := "RMQGUARD_OBR_" + strings.ReplaceAll(testenv.Unique("r"), "-", "_")
	require.NoError(t, rmq.EnsureTopic(ctx, []string{ns}, testenv.Broker(t), topic, 4))
	t.Cleanup(func() { _ = rmq.DeleteTopic(context.Background(), []string{ns}, testenv.Broker(t), topic) })
	r := newRoutes([]string{ns}, "")
	qs, err := r.queues(ctx, topic)
	require.NoError(t, err)
	require.Len(t, qs, 4)
	for i, q := range qs {
		require.Equal(t, topic, q.Topic)
		require.Equal(t, i, q.QueueId)
		require.NotEmpty(t, q.BrokerName)
	}
	missing, err := r.queues(ctx, topic+"_MISSING")
	require.ErrorIs(t, err, rmq.ErrTopicNotExist)
	require.Empty(t, missing)

	dead := newRoutes([]string{"127.0.0.1:1"}, "")
	dead.known[topic] = knownRoute{qs: qs, at: time.Now().Add(-time.Hour)}
	stale, err := dead.queues(ctx, topic)
	require.Error(t, err)
	require.Equal(t, qs, stale, "the last list known")
}
