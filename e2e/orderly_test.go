package e2e

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/topics"
)

// orderlyQueues is the queue count of the orderly tests' topic: several queues, so that per-aggregate
// order comes from the queue selector and the orderly consumer, not from a single queue.
const orderlyQueues = 4

// step is one thing that happened to an account event, in the order the orderly consumer did it.
type step struct {
	account string
	version int
	attempt int
	what    string // "failed", "applied", or a final decision other than processed, e.g. "dead_lettered"
}

func (s step) String() string {
	return fmt.Sprintf("%s v%d #%d %s", s.account, s.version, s.attempt, s.what)
}

// ledger records the steps of every account, and is the test's Observer: a final decision other than
// "processed" or "retry" (a dead letter published, …) is recorded as a step when the consumer reports it,
// which is before the client is told and so before the queue's next message is handled.
type ledger struct {
	mu    sync.Mutex
	steps []step
	// applied receives "account vN" for every applied event (buffered).
	applied chan string
}

func newLedger() *ledger { return &ledger{applied: make(chan string, 100)} }

func (l *ledger) add(s step) {
	l.mu.Lock()
	l.steps = append(l.steps, s)
	l.mu.Unlock()
	if s.what == "applied" {
		l.applied <- fmt.Sprintf("%s v%d", s.account, s.version)
	}
}

// of returns the steps of one account, in order.
func (l *ledger) of(account string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.steps {
		if s.account == account {
			out = append(out, s.String())
		}
	}
	return out
}

// Decided records the final decisions the handler did not (dead letters, for instance).
func (l *ledger) Decided(d *consumer.Delivery, dec consumer.Decision) {
	if k := dec.Outcome.Kind; k != consumer.KindProcessed && k != consumer.KindRetry {
		l.add(step{account: d.Msg.GetProperty("ACCOUNT"), version: version(d), attempt: d.Attempt, what: k.String()})
	}
}
func (l *ledger) InFlight(string, int)           {}
func (l *ledger) Lag(string, string, int64)      {}
func (l *ledger) Paused(string, string)          {}
func (l *ledger) Unpaused(string, time.Duration) {}

func version(d *consumer.Delivery) int {
	v, _ := strconv.Atoi(d.Msg.GetProperty("VERSION"))
	return v
}

// waitApplied waits until every one of want ("account vN") was applied, or fails the test after 90 s.
func (l *ledger) waitApplied(t *testing.T, want ...string) {
	t.Helper()
	missing := map[string]bool{}
	for _, w := range want {
		missing[w] = true
	}
	timeout := time.After(90 * time.Second)
	for len(missing) > 0 {
		select {
		case a := <-l.applied:
			delete(missing, a)
		case <-timeout:
			t.Fatalf("not applied within 90 s: %v", missing)
		}
	}
}

// orderlyHandler applies an account event unless fail says it fails on this delivery; before it decides,
// it calls hold (if set), which may block.
func orderlyHandler(l *ledger, fail func(account string, version, attempt int) bool, hold func(d *consumer.Delivery)) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		if hold != nil {
			hold(d)
		}
		s := step{account: d.Msg.GetProperty("ACCOUNT"), version: version(d), attempt: d.Attempt}
		if fail(s.account, s.version, s.attempt) {
			s.what = "failed"
			l.add(s)
			return consumer.Outcome{}, fmt.Errorf("apply %s v%d: %w", s.account, s.version, errLedgerLocked)
		}
		s.what = "applied"
		l.add(s)
		return consumer.Processed(), nil
	})
}

var errLedgerLocked = errors.New("ledger row locked")

// startHashProducer starts a producer that picks the queue by the message's sharding key (the client's
// hash selector), so that all events of one account go to one queue, in send order.
func (w *world) startHashProducer() rocketmq.Producer {
	w.t.Helper()
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver(w.ns)),
		producer.WithGroupName(w.group+"-orderly-producer"),
		producer.WithInstanceName(testenv.Unique("orderly-producer")),
		producer.WithQueueSelector(producer.NewHashQueueSelector()),
		producer.WithRetry(2))
	require.NoError(w.t, err)
	require.NoError(w.t, p.Start())
	w.t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// sendAccountEvents sends versions 1..n of account, sharded by the account, and returns the queue they
// went to (it requires one queue for all of them).
func (w *world) sendAccountEvents(p rocketmq.Producer, account string, n int) int {
	w.t.Helper()
	queue := -1
	for v := 1; v <= n; v++ {
		msg := primitive.NewMessage(w.topic, []byte(fmt.Sprintf(`{"account":%q,"version":%d}`, account, v)))
		msg.WithTag("Deposit")
		msg.WithKeys([]string{account})
		msg.WithShardingKey(account)
		msg.WithProperty("EVENT_ID", fmt.Sprintf("%s-%s-v%d", w.run, account, v))
		msg.WithProperty("ACCOUNT", account)
		msg.WithProperty("VERSION", strconv.Itoa(v))
		res, err := p.SendSync(w.ctx, msg)
		require.NoError(w.t, err)
		require.Equal(w.t, primitive.SendOK, res.Status)
		if queue == -1 {
			queue = res.MessageQueue.QueueId
		}
		require.Equal(w.t, queue, res.MessageQueue.QueueId, "every event of %s on one queue", account)
	}
	return queue
}

// accountOnAnotherQueue returns an account name that the hash selector (FNV-1a of the sharding key, modulo
// the queue count) puts on another queue than account; the test checks the queues the broker reports.
func accountOnAnotherQueue(account string) string {
	queueOf := func(key string) uint32 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(key))
		return h.Sum32() % orderlyQueues
	}
	for i := 2; ; i++ {
		other := "acc-" + strconv.Itoa(i)
		if queueOf(other) != queueOf(account) {
			return other
		}
	}
}

func orderlyConfig(maxAttempts int) consumer.Config {
	return consumer.Config{Orderly: true, SuspendTime: 100 * time.Millisecond, MaxAttempts: maxAttempts, DrainTimeout: 5 * time.Second}
}

// F3: v1, v2, v3 of acc-1 on one queue of a 4-queue topic; v1 fails twice. The orderly consumer suspends
// the queue, handles v1 again (attempts 0, 1, 2), and applies v2 and v3 strictly after it; another
// account's events are applied in their order too. Nothing is dead-lettered.
func TestE2E_F3_OrderlyRetryKeepsOrder(t *testing.T) {
	w := newWorld(t, orderlyQueues)
	p := w.startHashProducer()
	other := accountOnAnotherQueue("acc-1")
	w.sendAccountEvents(p, "acc-1", 3)
	w.sendAccountEvents(p, other, 3)
	l := newLedger()
	fail := func(account string, version, attempt int) bool {
		return account == "acc-1" && version == 1 && attempt < 2
	}
	c := w.start(orderlyConfig(3), orderlyHandler(l, fail, nil), consumer.WithObserver(l))

	l.waitApplied(t, "acc-1 v3", other+" v3")
	require.NoError(t, c.Shutdown(context.Background()))

	assert.Equal(t, []string{
		"acc-1 v1 #0 failed", "acc-1 v1 #1 failed", "acc-1 v1 #2 applied", "acc-1 v2 #0 applied", "acc-1 v3 #0 applied",
	}, l.of("acc-1"), "v1 retried in place; v2 and v3 strictly after it")
	assert.Equal(t, []string{other + " v1 #0 applied", other + " v2 #0 applied", other + " v3 #0 applied"}, l.of(other))
	w.requireNoDeadLetters()
}

// F3: acc-1's v1 always fails. With MaxAttempts 2 it is handled three times (attempts 0, 1, 2), then the
// consumer publishes it to %DLQ%<group> itself, with its properties and the reason, and only then the
// queue moves on: v2 and v3 are applied in order after it. Meanwhile another account on another queue is
// applied in order: acc-1's first delivery waits until that account's v3 has been applied.
func TestE2E_F3_OrderlyPoisonGoesToDLQ(t *testing.T) {
	w := newWorld(t, orderlyQueues)
	p := w.startHashProducer()
	other := accountOnAnotherQueue("acc-1")
	poisonQueue := w.sendAccountEvents(p, "acc-1", 3)
	require.NotEqual(t, poisonQueue, w.sendAccountEvents(p, other, 3), "the other account is on another queue")
	l := newLedger()
	otherDone := make(chan struct{})
	var holdOnce sync.Once
	hold := func(d *consumer.Delivery) {
		if d.Msg.GetProperty("ACCOUNT") != "acc-1" {
			return
		}
		holdOnce.Do(func() {
			select {
			case <-otherDone:
			case <-time.After(60 * time.Second):
				t.Errorf("%s was not applied while acc-1 v1 held its queue", other)
			}
		})
	}
	fail := func(account string, version, _ int) bool { return account == "acc-1" && version == 1 }
	c := w.start(orderlyConfig(2), orderlyHandler(l, fail, hold), consumer.WithObserver(l))

	l.waitApplied(t, other+" v3")
	close(otherDone)
	l.waitApplied(t, "acc-1 v3")
	require.NoError(t, c.Shutdown(context.Background()))

	assert.Equal(t, []string{
		"acc-1 v1 #0 failed", "acc-1 v1 #1 failed", "acc-1 v1 #2 failed", "acc-1 v1 #2 dead_lettered",
		"acc-1 v2 #0 applied", "acc-1 v3 #0 applied",
	}, l.of("acc-1"), "MaxAttempts+1 deliveries, the letter published, then the queue moves on in order")
	assert.Equal(t, []string{other + " v1 #0 applied", other + " v2 #0 applied", other + " v3 #0 applied"}, l.of(other))

	var res dlqtool.ScanResult
	require.Eventually(t, func() bool {
		var err error
		res, err = dlqtool.Scan(w.ctx, topics.Cluster{NameServers: w.ns}, w.group, dlqtool.ScanOptions{})
		return err == nil && len(res.Letters) >= 1
	}, 60*time.Second, time.Second, "v1 reaches %%DLQ%%%s", w.group)
	require.Len(t, res.Letters, 1, "v1 alone")
	letter := res.Letters[0]
	assert.Equal(t, w.run+"-acc-1-v1", letter.EventID)
	assert.Equal(t, w.topic, letter.OriginTopic)
	assert.Equal(t, "retries exhausted after 3 deliveries: apply acc-1 v1: ledger row locked", letter.Reason)
	assert.Equal(t, 2, letter.Attempts, "dead-lettered on its delivery with ReconsumeTimes 2")
	assert.Equal(t, "acc-1", letter.Properties["ACCOUNT"], "the message's properties are kept")
	assert.Equal(t, "1", letter.Properties["VERSION"])
	assert.Equal(t, "acc-1", letter.Properties["SHARDING_KEY"])
	assert.Equal(t, "Deposit", letter.Tags)
	assert.Equal(t, "acc-1", letter.Keys)
	assert.JSONEq(t, `{"account":"acc-1","version":1}`, string(letter.Body))
}

// F3 with F9: a consumer stopped while acc-1's v1 keeps failing (its queue suspended between attempts, or
// its handler running) loses nothing: the orderly path never commits past an unacknowledged message and the
// client drops its process queues on shutdown, so the next consumer of the group gets v1 again (its
// in-memory attempt count starts over) and then v2 and v3, in order.
func TestE2E_F3_F9_OrderlyShutdownWhileSuspendedLosesNothing(t *testing.T) {
	w := newWorld(t, orderlyQueues)
	p := w.startHashProducer()
	w.sendAccountEvents(p, "acc-1", 3)
	first := newLedger()
	failing := func(string, int, int) bool { return true }
	c := w.start(orderlyConfig(16), orderlyHandler(first, failing, nil), consumer.WithObserver(first))
	require.Eventually(t, func() bool { return len(first.of("acc-1")) >= 3 }, 60*time.Second, 50*time.Millisecond,
		"v1 fails and is handled again")
	require.NoError(t, c.Shutdown(context.Background()))
	for _, s := range first.of("acc-1") {
		require.Regexp(t, `^acc-1 v1 #\d+ failed$`, s, "nothing behind v1 was handled while it failed")
	}

	second := newLedger()
	succeeding := func(string, int, int) bool { return false }
	w.start(orderlyConfig(16), orderlyHandler(second, succeeding, nil), consumer.WithObserver(second))
	second.waitApplied(t, "acc-1 v3")

	assert.Equal(t, []string{"acc-1 v1 #0 applied", "acc-1 v2 #0 applied", "acc-1 v3 #0 applied"}, second.of("acc-1"),
		"v1 comes back after the restart, then v2 and v3 in order")
	w.requireNoDeadLetters()
}
