// Package e2e runs rmqguard end to end through the real RocketMQ broker, MariaDB and the example domain.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
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
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
	"github.com/rmqguard/rmqguard/topics"
)

// redeliveries records what the chain saw of redelivered messages (ReconsumeTimes > 0).
type redeliveries struct {
	mu     sync.Mutex
	topics map[string]int // Delivery.Topic → count
}

func (r *redeliveries) middleware() middleware.Middleware {
	return middleware.Func(func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			if d.Attempt > 0 {
				r.mu.Lock()
				r.topics[d.Topic]++
				r.mu.Unlock()
			}
			return next.Handle(ctx, d)
		})
	})
}

func (r *redeliveries) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.topics))
	for k, v := range r.topics {
		out[k] = v
	}
	return out
}

// TestE2E_S1_F4_F11_500EventsWithDuplicatesAndPoison sends 500 messages (10 % re-sends with new message
// IDs and the same EVENT_ID, 10 failing once, one poison) through the broker and checks that every
// distinct event took effect once, the re-sends were counted as duplicates, retried messages were seen
// with their original topic (F4), and the poison message alone is in %DLQ%<group> with its reason.
func TestE2E_S1_F4_F11_500EventsWithDuplicatesAndPoison(t *testing.T) {
	w := newWorld(t, 4)
	db := shoptest.MySQL(t)
	ctx, topic, group, run, prod := w.ctx, w.topic, w.group, w.run, w.prod

	plan, err := shop.Workload{RunID: run, Topic: topic, Messages: 500, DuplicateShare: 0.1, FailOnce: 10, Poison: true}.Plan()
	require.NoError(t, err)

	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	// The client logs from goroutines that outlive the test, so its rlog output stays on its own writer.
	rlog.SetLogLevel("warn")
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	seen := &redeliveries{topics: map[string]int{}}
	ledger := testenv.NewLedger(t, db, run)
	handler := testenv.Must(middleware.Chain(dedup.Handle(ledger.Handler(shop.HandleOrderCreated)),
		testenv.Must(middleware.Metrics(m)), seen.middleware(), middleware.Recover(log), middleware.Classify(),
		eventID, middleware.Timeout(10*time.Second), testenv.Must(middleware.Dedup(store))))
	publisher, err := dlq.NewPublisher(prod)
	require.NoError(t, err)
	c := w.start(consumer.Config{MaxAttempts: 3, DrainTimeout: 10 * time.Second}, handler, consumer.WithLogger(log),
		consumer.WithDeadLetterSink(publisher), consumer.WithObserver(m))

	// Bad input: no event ID at all (no EVENT_ID, no KEYS), and an event ID longer than the column.
	noID := primitive.NewMessage(topic, []byte(`{"orderNo":"x"}`))
	noID.WithTag(shop.EventOrderCreated)
	noID.WithProperty("CASE", "no-id")
	longID := primitive.NewMessage(topic, []byte(`{}`))
	longID.WithTag(shop.EventOrderCreated)
	longID.WithProperty("CASE", "long-id")
	longID.WithProperty("EVENT_ID", strings.Repeat("x", dedupsql.MaxEventIDLength+1))
	w.send(append(plan.Messages, noID, longID)...)

	prefix := run + "-o"
	require.Eventually(t, func() bool {
		orders, _, err := shop.Effects(ctx, db, prefix)
		return err == nil && orders >= plan.Events &&
			testutil.ToFloat64(m.Messages.WithLabelValues(group, topic, "dead_lettered")) >= 3
	}, 3*time.Minute, 500*time.Millisecond, "all %d events take effect and the poison is dead-lettered", plan.Events)
	require.NoError(t, c.Shutdown(ctx))

	orders, reservations, err := shop.Effects(ctx, db, prefix)
	require.NoError(t, err)
	assert.Equal(t, plan.Events, orders, "one order per distinct event")
	assert.Equal(t, plan.Events, reservations, "one reservation per distinct event")
	var dedupRows int
	require.NoError(t, db.GetContext(ctx, &dedupRows, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ?`, group))
	assert.Equal(t, plan.Events, dedupRows)
	ledger.RequireOncePerEvent(t, plan.Events)
	assert.GreaterOrEqual(t, testutil.ToFloat64(m.Duplicates.WithLabelValues(group, topic, "resend")), float64(plan.Duplicates),
		"the re-sends with new message IDs are counted as resends")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.DeadLetters.WithLabelValues(group, topic, "permanent")), "the poison")
	assert.Equal(t, 2.0, testutil.ToFloat64(m.DeadLetters.WithLabelValues(group, topic, "unidentifiable")), "no ID, ID too long")

	redelivered := seen.snapshot()
	assert.GreaterOrEqual(t, redelivered[topic], 10, "F4: the failOnce events came back with their original topic: %v", redelivered)
	for tpc := range redelivered {
		assert.False(t, strings.HasPrefix(tpc, rmq.RetryTopicPrefix), "F4: no delivery is presented on %s", tpc)
	}

	letters, err := dlqtool.Read(ctx, topics.Cluster{NameServers: w.ns}, group, 100)
	require.NoError(t, err)
	require.Len(t, letters, 3, "the poison and the two unidentifiable messages, nothing else, are dead-lettered")
	byCase := map[string]*primitive.MessageExt{}
	for _, l := range letters {
		assert.Equal(t, topic, l.GetProperty(primitive.PropertyRetryTopic), "the origin topic travels with the letter")
		assert.Equal(t, group, l.GetProperty(letter.PropGroup))
		key := l.GetProperty("CASE")
		if key == "" {
			key = l.GetProperty("EVENT_ID")
		}
		byCase[key] = l
	}
	require.Contains(t, byCase, plan.PoisonEventID)
	assert.Contains(t, byCase[plan.PoisonEventID].GetProperty(letter.PropReason), "undecodable body")
	assert.Equal(t, run+"-poison", byCase[plan.PoisonEventID].GetKeys())
	require.Contains(t, byCase, "no-id")
	assert.Contains(t, byCase["no-id"].GetProperty(letter.PropReason), "unidentifiable")
	require.Contains(t, byCase, "long-id")
	assert.Contains(t, byCase["long-id"].GetProperty(letter.PropReason), "longer than")
	assert.Equal(t, 2.0, testutil.ToFloat64(m.Unidentifiable.WithLabelValues(group, topic)))
}

// TestE2E_F5_MaxAttemptsBecomesMaxReconsumeTimes: with MaxAttempts 3 and WithDeadLetterSink(nil), an always-failing
// handler sees exactly 4 deliveries (ReconsumeTimes 0..3); then the broker moves the message to
// %DLQ%<group> with its KEYS and properties intact.
func TestE2E_F5_MaxAttemptsBecomesMaxReconsumeTimes(t *testing.T) {
	w := newWorld(t, 1)
	ctx, topic, group := w.ctx, w.topic, w.group

	var mu sync.Mutex
	attempts := map[string][]int{} // EVENT_ID → ReconsumeTimes seen
	var wrong []string             // deliveries whose Attempt or MaxAttempts disagree with the client
	handler := testenv.Must(middleware.Chain(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		id := d.Msg.GetProperty("EVENT_ID")
		mu.Lock()
		attempts[id] = append(attempts[id], d.Attempt)
		if d.MaxAttempts != 3 || d.Attempt != int(d.Msg.ReconsumeTimes) {
			wrong = append(wrong, fmt.Sprintf("%s: Attempt %d ReconsumeTimes %d MaxAttempts %d", id, d.Attempt, d.Msg.ReconsumeTimes, d.MaxAttempts))
		}
		mu.Unlock()
		if id == "e-permanent" {
			return consumer.Outcome{}, retry.Permanent(errors.New("unknown SKU"))
		}
		return consumer.Outcome{}, errors.New("db down")
	}), middleware.Classify()))
	c := w.start(consumer.Config{MaxAttempts: 3, DrainTimeout: 5 * time.Second}, handler, consumer.WithDeadLetterSink(nil))
	defer func() { _ = c.Shutdown(context.Background()) }()

	for _, id := range []string{"e-1", "e-permanent"} {
		msg := primitive.NewMessage(topic, []byte(`{"orderNo":"o-1"}`))
		msg.WithKeys([]string{"k-" + id})
		msg.WithTag("OrderCreated")
		msg.WithProperty("EVENT_ID", id)
		w.send(msg)
	}

	var letters []*primitive.MessageExt
	var err error
	require.Eventually(t, func() bool {
		letters, err = dlqtool.Read(ctx, topics.Cluster{NameServers: w.ns}, group, 10)
		return err == nil && len(letters) >= 2
	}, 90*time.Second, time.Second, "both messages reach %%DLQ%%%s", group)
	time.Sleep(2 * time.Second) // a further delivery, if the mapping were wrong, would come within this
	mu.Lock()
	assert.Equal(t, []int{0, 1, 2, 3}, attempts["e-1"], "MaxAttempts 3 = MaxReconsumeTimes 3: four deliveries")
	assert.Equal(t, []int{0}, attempts["e-permanent"], "a permanent error goes to the DLQ at once (delay level -1)")
	assert.Empty(t, wrong, "every Delivery carries MaxAttempts 3 and Attempt = ReconsumeTimes")
	mu.Unlock()
	require.Len(t, letters, 2)
	for _, l := range letters {
		id := l.GetProperty("EVENT_ID")
		assert.Equal(t, "k-"+id, l.GetKeys(), "KEYS intact")
		assert.Equal(t, "OrderCreated", l.GetTags())
		assert.Equal(t, topic, l.GetProperty(primitive.PropertyRetryTopic))
	}
}

// TestE2E_S2_TwoConsumersSameEventConcurrently runs two consumers of one group (two client instances, as two
// processes would be) on a 4-queue topic and sends every event five times, spread over the queues, so that
// copies of one event are handled by both consumers at the same time. Each event takes effect once, nothing
// is dead-lettered, and every copy ends as processed or duplicate.
func TestE2E_S2_TwoConsumersSameEventConcurrently(t *testing.T) {
	w := newWorld(t, 4)
	db := shoptest.MySQL(t)
	ctx, topic, group, run := w.ctx, w.topic, w.group, w.run
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	ledger := testenv.NewLedger(t, db, run)

	type member struct {
		c       *consumer.Consumer
		metrics *metrics.Metrics
	}
	var members []member
	for i := range 2 {
		m, err := metrics.New(prometheus.NewRegistry())
		require.NoError(t, err)
		eventID, err := middleware.EventID(middleware.EventIDConfig{})
		require.NoError(t, err)
		handler := testenv.Must(middleware.Chain(dedup.Handle(ledger.Handler(shop.HandleOrderCreated)),
			testenv.Must(middleware.Metrics(m)), middleware.Recover(zap.NewNop()), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))))
		c := w.start(consumer.Config{InstanceName: fmt.Sprintf("%s-%d", run, i), ConsumeGoroutines: 8}, handler, consumer.WithObserver(m))
		defer func() { _ = c.Shutdown(context.Background()) }()
		members = append(members, member{c: c, metrics: m})
	}
	handled := func(i int, outcome string) float64 {
		return testutil.ToFloat64(members[i].metrics.Messages.WithLabelValues(group, topic, outcome))
	}

	// Rounds of 8 events × 5 copies until both consumers have handled messages (the second one joins the
	// group's rebalance a moment after the first).
	events, copies := 0, 0
	sendRound := func() {
		plan, err := shop.Workload{RunID: fmt.Sprintf("%s-r%d", run, events), Topic: topic, Messages: 8}.Plan()
		require.NoError(t, err)
		for _, msg := range plan.Messages {
			for range 5 {
				dup := primitive.NewMessage(topic, msg.Body)
				for k, v := range msg.GetProperties() {
					dup.WithProperty(k, v)
				}
				w.send(dup)
				copies++
			}
		}
		events += plan.Events
	}
	total := func(outcome string) float64 { return handled(0, outcome) + handled(1, outcome) }
	both := func() bool {
		return handled(0, "processed")+handled(0, "duplicate") > 0 && handled(1, "processed")+handled(1, "duplicate") > 0
	}
	deadline := time.Now().Add(60 * time.Second)
	for sendRound(); !both() && time.Now().Before(deadline); sendRound() {
		time.Sleep(time.Second)
	}
	require.True(t, both(), "both consumers of the group handled messages")
	require.Eventually(t, func() bool {
		return total("processed")+total("duplicate") >= float64(copies)
	}, 90*time.Second, 250*time.Millisecond, "all %d copies handled", copies)

	orders, reservations, err := shop.Effects(ctx, db, run)
	require.NoError(t, err)
	assert.Equal(t, events, orders, "one effect per event")
	assert.Equal(t, events, reservations)
	ledger.RequireOncePerEvent(t, events)
	assert.Equal(t, float64(events), total("processed"))
	// A rebalance (the second consumer joining) can hand a queue over before its offset is committed, so
	// some copies arrive once more: more duplicates, never more effects.
	assert.GreaterOrEqual(t, total("duplicate"), float64(copies-events))
	assert.Zero(t, total("dead_letter")+total("dead_lettered"), "no loser is dead-lettered")
	w.requireNoDeadLetters()
}

// queueMovesOn sends one bad message, then followers good ones, to a one-queue topic. misbehave runs in the
// handler on the bad message's first delivery (after its business writes, inside its transaction), under
// deadline (middleware.Timeout or middleware.Deadline) when that is not nil. It checks that the bad message comes back from the
// retry topic and, like every follower, takes effect once — counted once release (if not nil) has let the
// first delivery's handler go and that delivery's transaction has ended, so a late commit would show; and
// that after a restart of the group nothing is redelivered — a sentinel sent then is the first message the
// new consumer sees — so the committed offset moved past all of them. It returns the world and the metrics
// of the run.
func queueMovesOn(t *testing.T, followers int, deadline []middleware.Middleware, misbehave func(ctx context.Context), release func()) (*world, *metrics.Metrics) {
	t.Helper()
	w := newWorld(t, 1)
	db := shoptest.MySQL(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	bad := w.run + "-bad"
	ledger := testenv.NewLedger(t, db, w.run)
	badFirstEnded := make(chan struct{}) // closed when the bad first delivery's Dedup call (its transaction) ended
	var endOnce sync.Once
	awaitBadFirst := middleware.Func(func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			if d.EventID == bad && d.Attempt == 0 {
				defer endOnce.Do(func() { close(badFirstEnded) })
			}
			return next.Handle(ctx, d)
		})
	})

	var mu sync.Mutex
	var seen []string // EVENT_ID@attempt, in handling order
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	start := func() *consumer.Consumer {
		eventID, err := middleware.EventID(middleware.EventIDConfig{})
		require.NoError(t, err)
		record := middleware.Func(func(next consumer.Handler) consumer.Handler {
			return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
				mu.Lock()
				seen = append(seen, fmt.Sprintf("%s@%d", d.Msg.GetProperty("EVENT_ID"), d.Attempt))
				mu.Unlock()
				return next.Handle(ctx, d)
			})
		})
		mws := []middleware.Middleware{testenv.Must(middleware.Metrics(m)), record, middleware.Recover(zap.NewNop()), middleware.Classify(), eventID}
		mws = append(mws, deadline...) // none, or the deadline middleware
		mws = append(mws, awaitBadFirst, testenv.Must(middleware.Dedup(store)))
		handler := testenv.Must(middleware.Chain(dedup.Handle(ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			o, err := shop.HandleOrderCreated(ctx, tx, d)
			if err == nil && d.EventID == bad && d.Attempt == 0 {
				misbehave(ctx)
			}
			return o, err
		})), mws...))
		return w.start(consumer.Config{DrainTimeout: 10 * time.Second}, handler, consumer.WithObserver(m))
	}
	c := start()

	plan, err := shop.Workload{RunID: w.run, Topic: w.topic, Messages: followers}.Plan()
	require.NoError(t, err)
	first, err := shop.Workload{RunID: w.run + "-x", Topic: w.topic, Messages: 1}.Plan()
	require.NoError(t, err)
	first.Messages[0].WithProperty("EVENT_ID", bad)
	w.send(append(first.Messages, plan.Messages...)...)

	require.Eventually(t, func() bool {
		return testutil.ToFloat64(m.Messages.WithLabelValues(w.group, w.topic, "processed")) >= float64(followers+1)
	}, 60*time.Second, 200*time.Millisecond, "the bad message and the %d others processed", followers)
	mu.Lock()
	assert.Contains(t, seen, bad+"@0")
	assert.Contains(t, seen, bad+"@1", "the bad message came back from the retry topic")
	mu.Unlock()
	if release != nil {
		release()
	}
	select {
	case <-badFirstEnded:
	case <-w.ctx.Done():
		t.Fatal("the bad message's first delivery never ended")
	}
	orders, _, err := shop.Effects(w.ctx, db, w.run)
	require.NoError(t, err)
	assert.Equal(t, followers+1, orders, "each took effect once; the bad first attempt wrote nothing")
	ledger.RequireOncePerEvent(t, followers+1)
	w.requireNoDeadLetters()
	require.NoError(t, c.Shutdown(w.ctx)) // persists the committed offsets

	mu.Lock()
	seen = nil
	mu.Unlock()
	start()
	sentinel, err := shop.Workload{RunID: w.run + "-sentinel", Topic: w.topic, Messages: 1}.Plan()
	require.NoError(t, err)
	w.send(sentinel.Messages[0])
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0
	}, 60*time.Second, 200*time.Millisecond)
	mu.Lock()
	assert.Equal(t, sentinel.Messages[0].GetProperty("EVENT_ID")+"@0", seen[0], "nothing before the sentinel was redelivered")
	mu.Unlock()
	return w, m
}

// TestE2E_F2_PanicIsRetriedAtTheRetryDelayWhileTheQueueMovesOn: the first message on the queue panics after
// its business writes, 100 good ones follow. The panic is recovered and counted, the transaction rolled
// back; the 100 are processed; the bad one returns at the retry delay (1 s here), not after the client's
// 15-minute consume timeout, and the committed offset moves past them all.
func TestE2E_F2_PanicIsRetriedAtTheRetryDelayWhileTheQueueMovesOn(t *testing.T) {
	w, m := queueMovesOn(t, 100, nil, func(context.Context) { panic("explodes on its first delivery") }, nil)

	assert.Equal(t, 1.0, testutil.ToFloat64(m.Panics.WithLabelValues(w.group, w.topic)))
}

// TestE2E_F7_HungHandlerIsCancelledAtItsTimeoutWhileTheQueueMovesOn: the first message's handler hangs,
// ignoring its context, with a 2 s handler timeout; 200 messages follow. The deadline ends its transaction
// (rolled back) and the message is retried; the 200 are processed and the committed offset passes them.
// The hung handler is released before the effects are counted: what it does after its deadline commits
// nothing.
func TestE2E_F7_HungHandlerIsCancelledAtItsTimeoutWhileTheQueueMovesOn(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	releaseOnce := func() { once.Do(func() { close(release) }) }
	defer releaseOnce() // the abandoned handler goroutine ends with the test, even if it fails early
	w, m := queueMovesOn(t, 200, []middleware.Middleware{middleware.Timeout(2 * time.Second)}, func(context.Context) { <-release }, releaseOnce)

	assert.Equal(t, 1.0, testutil.ToFloat64(m.Errors.WithLabelValues(w.group, w.topic, "transient")),
		"the deadline is one transient error")
}

// TestE2E_F7_SlowHandlerEndsAtItsDeadlineInlineWhileTheQueueMovesOn: the first message's handler is slow but
// honours its context, under middleware.Deadline (inline, no goroutine) of 2 s; 200 messages follow. The
// deadline ends the handler and its transaction (rolled back), the message is retried with the timeout
// outcome and takes effect once; the 200 are processed and the committed offset passes them.
func TestE2E_F7_SlowHandlerEndsAtItsDeadlineInlineWhileTheQueueMovesOn(t *testing.T) {
	w, m := queueMovesOn(t, 200, []middleware.Middleware{middleware.Deadline(2 * time.Second)}, func(ctx context.Context) { <-ctx.Done() }, nil)

	assert.Equal(t, 1.0, testutil.ToFloat64(m.Errors.WithLabelValues(w.group, w.topic, "transient")),
		"the deadline is one transient error")
}

// TestE2E_F9_GracefulStopLosesNothingAndDoublesNothing: ten messages that take 2 s each, four at a time; the
// consumer is stopped 1 s after the first started. In-flight transactions finish within the drain timeout
// and are acknowledged; messages the client had fetched but not handled are neither acknowledged nor sent
// back (MaxAttempts 1 would dead-letter a message sent back twice). After a restart every event has exactly
// one effect.
func TestE2E_F9_GracefulStopLosesNothingAndDoublesNothing(t *testing.T) {
	w := newWorld(t, 1)
	db := shoptest.MySQL(t)
	ctx, topic, group, run := w.ctx, w.topic, w.group, w.run
	store, err := dedup.NewStore(db)
	require.NoError(t, err)

	ledger := testenv.NewLedger(t, db, run)
	started := make(chan struct{}, 100)
	var sentBack atomic.Int32 // deliveries with ReconsumeTimes > 0
	start := func() *consumer.Consumer {
		eventID, err := middleware.EventID(middleware.EventIDConfig{})
		require.NoError(t, err)
		handler := testenv.Must(middleware.Chain(dedup.Handle(ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			if d.Attempt > 0 {
				sentBack.Add(1)
			}
			started <- struct{}{}
			select {
			case <-time.After(2 * time.Second):
			case <-ctx.Done():
				return consumer.Outcome{}, ctx.Err()
			}
			return shop.HandleOrderCreated(ctx, tx, d)
		})), middleware.Recover(zap.NewNop()), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))))
		c := w.start(consumer.Config{MaxAttempts: 1, ConsumeGoroutines: 4, DrainTimeout: 10 * time.Second}, handler)
		return c
	}
	c := start()

	plan, err := shop.Workload{RunID: run, Topic: topic, Messages: 10}.Plan()
	require.NoError(t, err)
	w.send(plan.Messages...)

	<-started
	time.Sleep(time.Second)
	require.NoError(t, c.Shutdown(ctx), "in-flight handlers finish within the drain timeout")
	committed, _, err := shop.Effects(ctx, db, run)
	require.NoError(t, err)
	assert.Positive(t, committed, "the handlers in flight at the stop committed")
	assert.Less(t, committed, 10, "the stop came before everything was handled")

	c2 := start()
	defer func() { _ = c2.Shutdown(context.Background()) }()
	require.Eventually(t, func() bool {
		orders, _, err := shop.Effects(ctx, db, run)
		return err == nil && orders >= 10
	}, 90*time.Second, 250*time.Millisecond, "after the restart every event takes effect")
	time.Sleep(3 * time.Second) // a doubled effect, if any, would be written within this
	orders, reservations, err := shop.Effects(ctx, db, run)
	require.NoError(t, err)
	assert.Equal(t, 10, orders, "nothing lost, nothing doubled")
	assert.Equal(t, 10, reservations)
	var rows int
	require.NoError(t, db.GetContext(ctx, &rows, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ?`, group))
	assert.Equal(t, 10, rows)
	ledger.RequireOncePerEvent(t, 10)
	assert.Zero(t, sentBack.Load(), "the stop sent nothing back to the broker: every message was handled at ReconsumeTimes 0")
	w.requireNoDeadLetters() // MaxAttempts 1: a message sent back twice would be there
}

// TestE2E_F10_BatchOfFourOneFailsEachMessageHasItsOwnTransaction: with BatchSize 4, b-1..b-4 arrive in one
// callback and b-3 fails once. Each message has its own transaction: b-1, b-2 and b-4 commit, the batch is
// retried as a whole (the client ignores AckIndex), and on redelivery the three are duplicates while only
// b-3 runs again.
func TestE2E_F10_BatchOfFourOneFailsEachMessageHasItsOwnTransaction(t *testing.T) {
	w := newWorld(t, 1)
	db := shoptest.MySQL(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)

	plan, err := shop.Workload{RunID: w.run, Topic: w.topic, Messages: 4}.Plan()
	require.NoError(t, err)
	// Sent before the consumer starts, so its first pull fetches all four and hands them over together.
	w.send(plan.Messages...)
	b3 := plan.Messages[2].GetProperty("EVENT_ID")

	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	ledger := testenv.NewLedger(t, db, w.run)
	handler := testenv.Must(middleware.Chain(dedup.Handle(ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.EventID == b3 && d.Attempt == 0 {
			return consumer.Outcome{}, errors.New("b-3 fails its first attempt")
		}
		return shop.HandleOrderCreated(ctx, tx, d)
	})), testenv.Must(middleware.Metrics(m)), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))))
	w.start(consumer.Config{BatchSize: 4}, handler, consumer.WithObserver(m))

	require.Eventually(t, func() bool {
		orders, _, err := shop.Effects(w.ctx, db, w.run)
		return err == nil && orders == 4 &&
			testutil.ToFloat64(m.Messages.WithLabelValues(w.group, w.topic, "duplicate")) >= 3
	}, 60*time.Second, 200*time.Millisecond, "all four take effect; the three committed ones come back as duplicates")

	// Three duplicates can only come from the batch being retried as a whole after b-1, b-2 and b-4 had
	// committed in their own transactions.
	assert.Equal(t, 3.0, testutil.ToFloat64(m.Messages.WithLabelValues(w.group, w.topic, "duplicate")),
		"b-1, b-2, b-4 were committed at the first attempt and are duplicates on redelivery")
	assert.Equal(t, 4.0, testutil.ToFloat64(m.Messages.WithLabelValues(w.group, w.topic, "processed")),
		"each message took effect once: three at the first attempt, b-3 at the second")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Messages.WithLabelValues(w.group, w.topic, "retry")), "only b-3 failed")
	assert.Equal(t, 3.0, testutil.ToFloat64(m.Duplicates.WithLabelValues(w.group, w.topic, "redelivery")), "the same messages again")
	assert.Equal(t, 3.0, testutil.ToFloat64(m.BatchRetried.WithLabelValues(w.group, w.topic)), "processed, then sent back with the batch")
	ledger.RequireOncePerEvent(t, 4)
}
