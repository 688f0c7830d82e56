package outbox

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// table is one test's own outbox table (a unique prefix) and an Outbox on it.
type table struct {
	db *sqlx.DB
	t  string
}

func newTable(t *testing.T, cfg Config) (*table, *Outbox) {
	t.Helper()
	db := testenv.MySQL(t)
	prefix := "obi" + strings.ReplaceAll(strings.TrimPrefix(testenv.Unique("obi"), "obi-"), "-", "_") + "_"
	tables, err := dedup.NewTables(prefix)
	require.NoError(t, err)
	_, err = dedup.Migrate(context.Background(), db.DB, dedup.WithTablePrefix(prefix))
	require.NoError(t, err)
	_, err = Migrate(context.Background(), db.DB, tables)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, tb := range []string{tables.Processed(), tables.Aggregate(), tables.Version(), prefix + Table, prefix + VersionTable} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tb)
		}
	})
	store, err := dedup.NewStore(db, dedup.WithTablePrefix(prefix))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	o, err := New(store, cfg)
	require.NoError(t, err)
	return &table{db: db, t: prefix + Table}, o
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

// fakeSender answers SEND_OK, or what next says (when set), and records the bodies it was given.
type fakeSender struct {
	mu   sync.Mutex
	sent []string
	next func(n int) error // n: 1 for the first call
}

func (s *fakeSender) SendSync(_ context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, string(msgs[0].Body))
	if s.next != nil {
		if err := s.next(len(s.sent)); err != nil {
			return nil, err
		}
	}
	return &primitive.SendResult{Status: primitive.SendOK}, nil
}

func (s *fakeSender) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

// runRelay runs o.run with s until the test ends (or the returned stop).
func runRelay(t *testing.T, o *Outbox, s sender) (stop func() time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.run(ctx, s) }()
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
		ids = append(ids, tb.add(t, o, KindMessage, "m-"+k, k))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &fakeSender{next: func(n int) error {
		if n == 3 {
			cancel() // Shutdown while the third send is in flight
			return context.Canceled
		}
		return nil
	}}
	require.NoError(t, o.run(ctx, s))
	s.mu.Lock()
	seen := append([]string(nil), s.sent...)
	s.mu.Unlock()
	require.GreaterOrEqual(t, len(seen), 3, "the stop came with the third send")
	answer := map[string]string{} // body → the status its answer must leave
	for i, body := range seen {
		answer[body] = StatusSent
		if i == 2 {
			answer[body] = StatusPending // the send the stop cut
		}
	}
	for i, k := range keys {
		want, ok := answer["m-"+k]
		if !ok {
			want = StatusPending // never sent: the stop came first
		}
		st, attempts := tb.status(t, ids[i])
		require.Equal(t, want, st, "row %s (sender saw %v)", k, seen)
		if st == StatusPending {
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
	tb.add(t, o, KindEffect, "notify", "fx")
	s := &fakeSender{}
	runRelay(t, o, s)
	o.Wake()
	runs.Wait() // 5 failed runs: the effect's wait is now 1.6 s, then 3 s
	id := tb.add(t, o, KindMessage, "m", "k")
	start := time.Now()
	o.Wake()
	require.Eventually(t, func() bool { st, _ := tb.status(t, id); return st == StatusSent }, 5*time.Second, 20*time.Millisecond)
	require.Less(t, time.Since(start), time.Second, "the message waited for the effect's back-off")
}

// An effect that ignores its context is abandoned at EffectTimeout: the relay goes on with the other
// rows and stops when asked, and the row is tried again later.
func TestRelay_EffectIgnoringItsContextIsAbandonedAtEffectTimeout(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	tb, o := newTable(t, Config{PollInterval: 100 * time.Millisecond, EffectTimeout: 300 * time.Millisecond,
		Effects: map[string]EffectFunc{"hang": func(context.Context, Effect) error { <-release; return nil }}})
	fx := tb.add(t, o, KindEffect, "hang", "fx")
	msg := tb.add(t, o, KindMessage, "m", "k")
	stop := runRelay(t, o, &fakeSender{})
	require.Eventually(t, func() bool { st, _ := tb.status(t, msg); return st == StatusSent }, 3*time.Second, 20*time.Millisecond,
		"a message behind a hanging effect")
	require.Eventually(t, func() bool { st, n := tb.status(t, fx); return st == StatusPending && n >= 1 }, 3*time.Second, 20*time.Millisecond)
	require.Less(t, stop(), 2*time.Second, "Run returns while the effect still hangs")
}

// Derived event IDs of different (scope, event ID, name) never collide, also when a scope and an event
// ID contain '/' (dedup.WithScope allows it), and fit the dedup event-ID column.
func TestEventID_DistinctPartsNeverCollide(t *testing.T) {
	long := strings.Repeat("x", dedup.MaxEventIDLength)
	cases := [][3]string{
		{"a/b", "c", "n"}, {"a", "b/c", "n"}, {"a", "b", "c"},
		{"g", "e", "n"}, {"g", "e", "n2"}, {"g2", "e", "n"},
		{"g", long, "n"}, {"g", long + "y", "n"}, {"g/" + long, "e", "n"}, {"g", long[2:] + "/e", "n"},
	}
	seen := map[string][3]string{}
	for _, c := range cases {
		id := EventID(c[0], c[1], c[2])
		require.LessOrEqual(t, len([]rune(id)), dedup.MaxEventIDLength, "%v", c)
		prev, dup := seen[id]
		require.False(t, dup, "%v and %v both derive %q", prev, c, id)
		seen[id] = c
		require.Equal(t, id, EventID(c[0], c[1], c[2]), "stable")
	}
	require.Equal(t, "g/e/n", EventID("g", "e", "n"), "readable when short and the scope has no '/'")
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
		_, err = o.Send(dedup.WithTx(context.Background(), tx), d, Message{Name: "m", Topic: "T", ShardingKey: k})
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		var got string
		require.NoError(t, tb.db.Get(&got, "SELECT sharding_key FROM "+tb.t+" WHERE source_event_id = ?", d.EventID))
		keys[d.EventID] = got
	}
	require.Equal(t, keys["ev-0"], keys["ev-1"], "one long key, one sharding key")
	require.NotEqual(t, keys["ev-1"], keys["ev-2"], "two long keys")
}
