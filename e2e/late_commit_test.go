package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// F39 end to end on the real broker and MariaDB: HandlerTimeout 1 s, the recommended chain (Standard, whose
// Deadline(0) watches HandlerTimeout), MaxAttempts 1, and every COMMIT of the store answered 1.5 s late by a
// testenv.CommitProxy between the store and MariaDB. Event "first" commits on its first delivery; event
// "last" fails its first delivery (a retry: nothing committed) and commits on its second, the last. Both
// are Processed: neither is delivered again (no attempt spent by the late answer), each is applied once,
// and %DLQ%<group> stays empty.
func TestE2E_CommitAnsweredAfterTheHandlerTimeoutIsProcessedAlsoOnTheLastDelivery(t *testing.T) {
	w := newWorld(t, 1)
	db := shoptest.MySQL(t)
	proxy := testenv.NewCommitProxy(t)
	store, err := dedup.NewStore(db, dedup.WithTxDSN(proxy.DSN()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	ledger := testenv.NewLedger(t, db, w.run)
	first, last := w.run+"-first", w.run+"-last"
	const handlerTimeout = time.Second
	proxy.DelayCommitAnswers(handlerTimeout + 500*time.Millisecond)

	var mu sync.Mutex
	attempts := map[string][]int{} // event ID → the Attempt of each delivery the handler saw
	handler := testenv.Must(middleware.Standard(dedup.Handle(ledger.Handler(func(_ context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		mu.Lock()
		attempts[d.EventID] = append(attempts[d.EventID], d.Attempt)
		mu.Unlock()
		if d.EventID == last && d.Attempt == 0 {
			return consumer.Retry(0, "fails its first delivery"), nil
		}
		return consumer.Processed(), nil
	})), middleware.StandardConfig{Store: store}))
	decisions := &decisionsByEvent{byEvent: map[string][]consumer.Decision{}}
	c := w.start(consumer.Config{HandlerTimeout: handlerTimeout, MaxAttempts: 1, DrainTimeout: 5 * time.Second}, handler,
		consumer.WithObserver(decisions))
	for _, id := range []string{first, last} {
		msg := primitive.NewMessage(w.topic, []byte(`{}`))
		msg.WithProperty("EVENT_ID", id)
		w.send(msg)
	}

	require.Eventually(t, func() bool {
		return len(decisions.of(first)) >= 1 && len(decisions.of(last)) >= 2
	}, 90*time.Second, 100*time.Millisecond, "both events are decided")
	time.Sleep(4 * time.Second) // a retry would come back within this (delay levels are 1 s)
	require.NoError(t, c.Shutdown(w.ctx))

	kinds := func(id string) []consumer.Kind {
		var out []consumer.Kind
		for _, dec := range decisions.of(id) {
			out = append(out, dec.Outcome.Kind)
		}
		return out
	}
	assert.Equal(t, []consumer.Kind{consumer.KindProcessed}, kinds(first), "first: %+v", decisions.of(first))
	assert.Equal(t, []consumer.Kind{consumer.KindRetry, consumer.KindProcessed}, kinds(last), "last: %+v", decisions.of(last))
	mu.Lock()
	assert.Equal(t, []int{0}, attempts[first], "first: handled once")
	assert.Equal(t, []int{0, 1}, attempts[last], "last: its retry, then its last delivery")
	mu.Unlock()
	assert.Equal(t, 2, proxy.Commits(), "each event committed once, answered late")
	ledger.RequireOncePerEvent(t, 2)
	w.requireNoDeadLetters()
}

// decisionsByEvent is an Observer that records the consumer's final decisions by event ID.
type decisionsByEvent struct {
	mu      sync.Mutex
	byEvent map[string][]consumer.Decision
}

func (o *decisionsByEvent) Decided(d *consumer.Delivery, dec consumer.Decision) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.byEvent[d.EventID] = append(o.byEvent[d.EventID], dec)
}

func (o *decisionsByEvent) of(id string) []consumer.Decision {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]consumer.Decision(nil), o.byEvent[id]...)
}

func (o *decisionsByEvent) InFlight(string, int)           {}
func (o *decisionsByEvent) Lag(string, string, int64)      {}
func (o *decisionsByEvent) Paused(string, string)          {}
func (o *decisionsByEvent) Unpaused(string, time.Duration) {}
