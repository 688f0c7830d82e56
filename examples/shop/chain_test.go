package shop_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
)

// S7 on the example domain, through the example's chain (Dedup, then Version on orders.version): a late
// OrderPaid of version 2 with a new event ID arrives after the order was paid: acknowledged as stale, the
// order keeps its state, the decision is recorded, and a redelivery of that late event is a duplicate.
func TestShop_LateOrderPaidIsStaleAndRecorded(t *testing.T) {
	w := newWorld(t)
	w.seed()
	h := w.chain(3)
	require.Equal(t, consumer.KindProcessed, w.through(h, w.created("o1", 3)).Kind)
	require.Equal(t, consumer.KindProcessed, w.through(h, w.paid("o1", "paid", 2)).Kind)

	late := w.paid("o1", "paid-late", 2)
	assert.Equal(t, consumer.KindStale, w.through(h, late).Kind)
	assert.Equal(t, consumer.KindDuplicate, w.through(h, late).Kind, "the stale decision is recorded: a redelivery is a duplicate")

	status, version := w.order("o1")
	assert.Equal(t, shop.StatusPaid, status)
	assert.Equal(t, int64(2), version)
	var result string
	require.NoError(t, w.db.Get(&result, `SELECT result_status FROM processed_event WHERE consumer_group = ? AND event_id = ?`,
		w.group, w.name("paid-late")))
	assert.NotEqual(t, dedupsql.ResultSuccess, result, "recorded as stale, not as a success")
}

// Reordering: an OrderPaid that overtakes its OrderCreated is a version gap, retried (nothing written, no
// dedup row), and applied once the order exists.
func TestDomain_EarlyOrderPaidIsRetriedUntilItsOrderExists(t *testing.T) {
	w := newWorld(t)
	w.seed()
	h := w.chain(3)
	early := w.paid("o1", "paid", 2)

	o := w.through(h, early)
	require.Equal(t, consumer.KindRetry, o.Kind, "a gap: %s", o)
	assert.Zero(t, w.int(`SELECT COUNT(*) FROM processed_event WHERE consumer_group = ? AND event_id = ?`, w.group, w.name("paid")))

	require.Equal(t, consumer.KindProcessed, w.through(h, w.created("o1", 3)).Kind)
	early.Attempt = 1
	assert.Equal(t, consumer.KindProcessed, w.through(h, early).Kind)
	status, version := w.order("o1")
	assert.Equal(t, shop.StatusPaid, status)
	assert.Equal(t, int64(2), version)
}

// A business re-send of OrderCreated under a new event ID is stale (the order is at version 1 already):
// one order, one reservation.
func TestDomain_OrderCreatedResentUnderNewEventIDIsStale(t *testing.T) {
	w := newWorld(t)
	w.seed()
	h := w.chain(3)
	require.Equal(t, consumer.KindProcessed, w.through(h, w.created("o1", 3)).Kind)

	again := w.created("o1", 3)
	again.Msg.WithProperty(shop.PropEventID, w.name("o1-created-resent"))
	assert.Equal(t, consumer.KindStale, w.through(h, again).Kind)
	assert.Equal(t, int64(97), w.onHand())
}

// An order event without AGGREGATE_VERSION is dead-lettered (the example requires versions); a
// PaymentCaptured (account aggregate) needs none.
func TestDomain_OrderEventWithoutVersionIsDeadLettered(t *testing.T) {
	w := newWorld(t)
	w.seed()
	h := w.chain(3)
	d := w.created("o1", 3)
	d.Msg.RemoveProperty(shop.PropAggregateVersion)

	assert.Equal(t, consumer.KindDeadLetter, w.through(h, d).Kind)
	assert.Equal(t, consumer.KindProcessed, w.through(h, w.captured("pay1", "captured", 100)).Kind)
}
