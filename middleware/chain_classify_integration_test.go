package middleware_test

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
)

// On the real MariaDB, a Classify composed by hand inside Dedup (Chain refuses that order) turns the
// handler's permanent error into a dead letter that Dedup rolls back: no dedup row and no effect, so the
// event is not recorded as processed and a re-driven copy from the DLQ is handled, not a duplicate.
func TestDedup_DeadLetterFromAClassifyInsideIsRolledBackOnMariaDB(t *testing.T) {
	db := testenv.MySQL(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	run, group := testenv.Unique("ci"), testenv.Unique("cg")
	ledger := testenv.NewLedger(t, db, run)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	errBad := errors.New("amount is not a number")
	inner := dedup.Handle(ledger.Handler(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		if err := ledger.Append(ctx, tx, d.EventID); err != nil {
			return consumer.Outcome{}, err
		}
		return consumer.Outcome{}, retry.Permanent(errBad)
	}))
	classify, dedupMW := middleware.Classify(), testenv.Must(middleware.Dedup(store))
	require.ErrorIs(t, testenv.Refused(middleware.Chain(inner, eventID, dedupMW, classify)), middleware.ErrChainOrder)
	h := eventID.Wrap(dedupMW.Wrap(classify.Wrap(inner))) // by hand: not checked
	msg := &primitive.MessageExt{MsgId: run + "-msg", Message: primitive.Message{Topic: "ORDER", Body: []byte(`{}`)}}
	msg.WithProperty("EVENT_ID", run+"-e1")

	o, err := h.Handle(context.Background(), testenv.NewDelivery(group, msg))

	require.ErrorIs(t, err, errBad)
	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Equal(t, causelabel.Permanent, o.Cause)
	var rows int
	require.NoError(t, db.Get(&rows, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ? AND event_id = ?`, group, run+"-e1"))
	assert.Zero(t, rows, "the claim was rolled back with the dead letter")
	assert.Zero(t, ledger.Count(t, run+"-e1"), "no effect")
}
