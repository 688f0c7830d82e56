package middleware_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// F7 on the real MariaDB with the inline Deadline: a slow handler that has written its effect and then
// waits on its context is ended by the 200 ms deadline; the message is a timeout retry, its transaction
// rolled back (no dedup row, no effect), so the redelivery applies the event once.
func TestDeadline_F7_SlowTransactionIsRolledBackAtTheDeadlineAndAppliedOnceOnRedelivery(t *testing.T) {
	db := testenv.MySQL(t)
	store, err := dedup.NewStore(db, dedup.WithTxDSN(testenv.MySQLDSN()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	run, group := testenv.Unique("dl"), testenv.Unique("cg")
	ledger := testenv.NewLedger(t, db, run)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	slow := true
	h := testenv.Must(middleware.Chain(dedup.Handle(ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if !slow {
			return consumer.Processed(), nil // the ledger appends the effect
		}
		if err := ledger.Append(ctx, tx, d.EventID); err != nil {
			return consumer.Outcome{}, err
		}
		select { // slow, honouring ctx
		case <-ctx.Done():
			return consumer.Outcome{}, ctx.Err()
		case <-time.After(30 * time.Second):
			return consumer.Processed(), nil
		}
	})), middleware.Recover(zap.NewNop()), middleware.Classify(), eventID, middleware.Deadline(200*time.Millisecond),
		testenv.Must(middleware.Dedup(store))))
	msg := &primitive.MessageExt{MsgId: run + "-msg", Message: primitive.Message{Topic: "ORDER", Body: []byte(`{}`)}}
	msg.WithProperty("EVENT_ID", run+"-e1")
	dedupRows := func() int {
		var n int
		require.NoError(t, db.Get(&n, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ? AND event_id = ?`, group, run+"-e1"))
		return n
	}

	start := time.Now()
	o, err := h.Handle(context.Background(), testenv.NewDelivery(group, msg))

	assert.Less(t, time.Since(start), 10*time.Second, "the handler was ended at the deadline, not after its 30 s")
	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.Equal(t, causelabel.Timeout, o.Cause)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "middleware.Deadline(200ms)")
	assert.Zero(t, dedupRows(), "the claim was rolled back")
	assert.Zero(t, ledger.Count(t, run+"-e1"), "no effect")

	slow = false
	msg.ReconsumeTimes = 1
	o, err = h.Handle(context.Background(), testenv.NewDelivery(group, msg))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, 1, dedupRows())
	assert.Equal(t, 1, ledger.Count(t, run+"-e1"), "applied once")
}
