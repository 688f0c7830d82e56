package dedup_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// S7 on the README's wiring (Version with States.LoadVersion, a plain read, and a handler whose effect is
// one Transition): eight OrderPaid events of order o-1 at version 2, distinct event IDs, handled at once.
// The conditional UPDATE settles the race the unlocked read lets through: one applies, seven are stale
// (their STALE rows recorded), the order is PAID at v2, and a late v1 is stale too.
func TestReadmeWiring_ConcurrentEventsOfOneOrderApplyOneAndAreStaleOrDuplicate(t *testing.T) {
	db := testenv.MySQL(t)
	orders, table := orderStates(t, db) // o-1 WAIT_PAY v1, status column "state"
	store := newStore(t, db)
	version, err := middleware.Version(store, middleware.VersionConfig{
		AggregateType: "order", EventTypes: []string{"OrderPaid"}, Require: true, Load: orders.LoadVersion})
	require.NoError(t, err)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	paid := dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		return dedup.TransitionOutcome(orders.Transition(ctx, tx, dedup.Transition{
			Key: d.AggregateID, From: []string{"WAIT_PAY"}, To: "PAID", Version: d.Version}))
	})
	h := testenv.Must(middleware.Chain(paid, middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store)), version))
	group, prefix := testenv.Unique("cg"), testenv.Unique("paid")
	message := func(i int, v int64) *primitive.MessageExt {
		m := &primitive.MessageExt{MsgId: testenv.Unique("msg"), Message: primitive.Message{Topic: "ORDER", Body: []byte(`{}`)}}
		m.WithProperty("EVENT_ID", fmt.Sprintf("%s-%d", prefix, i))
		m.WithProperty("EVENT_TYPE", "OrderPaid")
		m.WithProperty("AGGREGATE_ID", "o-1")
		m.WithProperty("AGGREGATE_VERSION", fmt.Sprint(v))
		return m
	}
	w := &versionWorld{h: h, group: group}
	const n = 8
	msgs := make([]*primitive.MessageExt, n)
	for i := range msgs {
		msgs[i] = message(i, 2)
	}
	kinds := make([]consumer.Kind, n)
	w.concurrently(msgs, kinds)
	byKind := map[consumer.Kind]int{}
	for _, k := range kinds {
		byKind[k]++
	}
	assert.Equal(t, map[consumer.Kind]int{consumer.KindProcessed: 1, consumer.KindStale: n - 1}, byKind)
	row := readOrder(t, db, table)
	assert.Equal(t, "PAID", row.State)
	assert.EqualValues(t, 2, row.Version)
	var stale int
	require.NoError(t, db.Get(&stale, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ? AND result_status = 'STALE'`, group))
	assert.Equal(t, n-1, stale)

	o, err := h.Handle(context.Background(), testenv.NewDelivery(group, message(n, 1)))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindStale, o.Kind, "a late v1")
}
