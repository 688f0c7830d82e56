package shop_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/examples/shop"
)

// The Version middleware checks the order named by the AGGREGATE_ID property; the handler writes the one
// named by the body. When they differ the event must not be acknowledged as stale (its order would never
// be created) nor move an order whose version was not checked: it is dead-lettered with the reason.
func TestDomain_AggregateIDPropertyThatDiffersFromTheBodyIsDeadLettered(t *testing.T) {
	w := newWorld(t)
	w.seed()
	h := w.chain(3)
	require.Equal(t, consumer.KindProcessed, w.through(h, w.created("o1", 3)).Kind)
	require.Equal(t, consumer.KindProcessed, w.through(h, w.created("o2", 1)).Kind)

	// OrderCreated of o3 whose property names o1 (at version 1): not a stale o1 event.
	d := w.created("o3", 2)
	d.Msg.WithProperty(shop.PropAggregateID, w.name("o1"))
	o := w.through(h, d)
	assert.Equal(t, consumer.KindDeadLetter, o.Kind, "%s", o)

	// OrderPaid of o2 whose property names o1: o2's version was never checked.
	p := w.paid("o2", "paid", 2)
	p.Msg.WithProperty(shop.PropAggregateID, w.name("o1"))
	o = w.through(h, p)
	assert.Equal(t, consumer.KindDeadLetter, o.Kind, "%s", o)
	status, _ := w.order("o2")
	assert.Equal(t, shop.StatusWaitPay, status)
}

// MariaDB's utf8mb4_bin is PAD SPACE: "o1 " is the same key as "o1". An OrderCreated of "<o1> " would be
// acknowledged as a stale o1 event and never take effect; it is dead-lettered instead.
func TestDomain_OrderNumberWithTrailingSpaceIsDeadLettered(t *testing.T) {
	w := newWorld(t)
	w.seed()
	h := w.chain(3)
	require.Equal(t, consumer.KindProcessed, w.through(h, w.created("o1", 3)).Kind)

	no := w.name("o1") + " "
	d := w.delivery(shop.EventOrderCreated, no+"x-created", no, 1, shop.OrderCreated{EventID: no + "x-created",
		OrderNo: no, SkuID: w.name("sku"), Quantity: 1})
	o := w.through(h, d)

	assert.Equal(t, consumer.KindDeadLetter, o.Kind, "%s", o)
	assert.Equal(t, int64(97), w.onHand())
}
