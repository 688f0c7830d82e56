package e2e

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
)

// leaseObserver is the consumer's metrics plus each message's final decisions, and a signal when a copy
// was retried for a held lease.
type leaseObserver struct {
	*metrics.Metrics
	mu        sync.Mutex
	decisions map[string][]consumer.Outcome // by message ID
	held      chan struct{}
	once      sync.Once
}

func (o *leaseObserver) Decided(d *consumer.Delivery, dec consumer.Decision) {
	o.Metrics.Decided(d, dec)
	o.mu.Lock()
	o.decisions[d.Msg.MsgId] = append(o.decisions[d.Msg.MsgId], dec.Outcome)
	o.mu.Unlock()
	if dec.Outcome.Cause == causelabel.LeaseHeld {
		o.once.Do(func() { close(o.held) })
	}
}

// F35 end to end on the real broker: a payment consumer in lease mode (4 consume goroutines, HandlerTimeout
// 4 s, lease 5 s) gets an event, and while the first copy's handler is making its slow call, a re-send of
// the event (another message ID). The re-send is answered ConsumeRetryLater with the cause lease_held — not
// acknowledged, the handler not run — and comes back through %RETRY% (at the delay level covering the lease:
// 5 s on a default broker, 1 s on the test broker, whose levels are all 1 s) as a duplicate. The handler ran once and never twice at a time; the effect is once; nothing is dead-lettered.
func TestE2E_F35_LeaseModeRetriesASecondCopyWhileTheFirstHoldsTheLease(t *testing.T) {
	w := newWorld(t, 2)
	db := shoptest.MySQL(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	ledger := testenv.NewLedger(t, db, w.run)
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	obs := &leaseObserver{Metrics: m, decisions: map[string][]consumer.Outcome{}, held: make(chan struct{})}

	var calls, inFlight, maxInFlight atomic.Int32
	entered := make(chan struct{}, 1)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	handler := testenv.Must(middleware.Chain(dedup.Handle(ledger.Handler(func(ctx context.Context, _ *sqlx.Tx, _ *consumer.Delivery) (consumer.Outcome, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for cur := maxInFlight.Load(); n > cur && !maxInFlight.CompareAndSwap(cur, n); cur = maxInFlight.Load() {
		}
		calls.Add(1)
		entered <- struct{}{}
		select { // the payment call lasts until the other copy was turned away (at most 3 s)
		case <-obs.held:
		case <-time.After(3 * time.Second):
		}
		return consumer.Processed(), nil
	})), testenv.Must(middleware.Metrics(m)), middleware.Recover(zap.NewNop()), middleware.Classify(), eventID, testenv.Must(middleware.Lease(store, 5*time.Second))))
	w.start(consumer.Config{ConsumeGoroutines: 4, HandlerTimeout: 4 * time.Second}, handler, consumer.WithObserver(obs))

	ev := w.run + "-pay"
	copyOf := func() *primitive.Message {
		msg := primitive.NewMessage(w.topic, []byte(`{}`))
		msg.WithProperty("EVENT_ID", ev)
		return msg
	}
	w.send(copyOf())
	select {
	case <-entered:
	case <-w.ctx.Done():
		t.Fatal("the first copy never reached the handler")
	}
	w.send(copyOf()) // the re-send, while the first copy holds the lease

	count := func(outcome string) float64 {
		return testutil.ToFloat64(m.Messages.WithLabelValues(w.group, w.topic, outcome))
	}
	require.Eventually(t, func() bool { return count("processed") == 1 && count("duplicate") == 1 },
		90*time.Second, 200*time.Millisecond, "the first copy processed, the re-send a duplicate after its retry")

	obs.mu.Lock()
	defer obs.mu.Unlock()
	var retried []consumer.Outcome
	for _, outcomes := range obs.decisions {
		for _, o := range outcomes {
			if o.Kind == consumer.KindRetry {
				retried = append(retried, o)
			}
		}
	}
	require.Len(t, retried, 1, "one copy was retried: %v", obs.decisions)
	assert.Equal(t, causelabel.LeaseHeld, retried[0].Cause)
	assert.Contains(t, retried[0].Reason, "lease held")
	assert.EqualValues(t, 1, calls.Load(), "the handler ran once")
	assert.EqualValues(t, 1, maxInFlight.Load(), "never two copies at once")
	assert.Equal(t, 1, ledger.Count(t, ev), "the effect is once")
	assert.Zero(t, testutil.ToFloat64(m.LeaseTakeovers.WithLabelValues(w.group)), "nothing died: no takeover")
	w.requireNoDeadLetters()
}
