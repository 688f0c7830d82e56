package middleware_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// F35: a holder died with its lease (a lease claimed and never ended stands for kill -9 after the call).
// The delivery that takes it over is told so, but fails on its own (the other side cannot say yet whether
// the first call happened): its failure must not erase what it learnt. The lease stays, expired, so the
// next delivery is a takeover too and is told; only the processed one is counted as a takeover.
func TestLease_TakeoverThatFailsKeepsTheTakeoverForTheNextDelivery(t *testing.T) {
	w := newLeaseWorld(t)
	ev := testenv.Unique("ev")
	d := w.delivery(ev, ev+"-m1", 0)
	d.EventID = ev
	_, err := w.store.ClaimLease(context.Background(), d, 200*time.Millisecond) // then killed
	require.NoError(t, err)
	w.waitExpired(t, ev)

	var tookOver []bool
	chain := w.chain(t, w.store, time.Minute, func(ctx context.Context, _ *sqlx.Tx, _ *consumer.Delivery) (consumer.Outcome, error) {
		tookOver = append(tookOver, dedup.Takeover(ctx))
		if len(tookOver) == 1 {
			return consumer.Outcome{}, errors.New("payment API: charge lookup timed out, try again")
		}
		return consumer.Processed(), nil
	})
	o, err := chain(context.Background(), w.delivery(ev, ev+"-m1", 1))
	require.Error(t, err)
	assert.Equal(t, consumer.KindRetry, o.Kind, "%s", o)
	assert.Equal(t, 1, w.rows(t, "event_lease", ev), "the lease row, trace of the dead holder's call, stays")

	o, err = chain(context.Background(), w.delivery(ev, ev+"-m1", 2))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind, "the retry runs at once: %s", o)
	assert.Equal(t, consumer.CauseTakeover, o.Cause, "counted once, on the processed delivery")
	assert.Equal(t, []bool{true, true}, tookOver, "both runs after the dead holder are told it may have called")
	assert.Equal(t, 1, w.ledger.Count(t, ev))
	assert.Equal(t, 1, w.rows(t, "processed_event", ev))
	assert.Equal(t, 0, w.rows(t, "event_lease", ev))
}
