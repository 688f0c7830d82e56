package shop_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/retry"
)

// S6 on the example domain: the order-timeout compensation job (its own transactions) and the
// OrderCancelled messages (through the example's chain) cancel the same 40 orders at the same moment
// (a barrier per order). Each order ends CANCELLED at version 2 with exactly one release, the stock is
// back where it started, and each order was cancelled by exactly one of the two.
func TestShop_CompensationJobRacingOrderCancelledReleasesOnce(t *testing.T) {
	const orders = 40
	w := newWorld(t)
	w.seed()
	h := w.chain(3)
	var reserved int64
	for i := range orders {
		require.Equal(t, consumer.KindProcessed, w.through(h, w.created(fmt.Sprintf("o%d", i), 1+i%3)).Kind)
		reserved += int64(1 + i%3)
	}
	require.Equal(t, 100-reserved, w.onHand())

	var mu sync.Mutex
	byMessage, byJob := 0, 0
	var wg sync.WaitGroup
	for i := range orders {
		no := fmt.Sprintf("o%d", i)
		barrier := make(chan struct{})
		wg.Add(2)
		go func() { // the message
			defer wg.Done()
			<-barrier
			kind := w.deliverUntilAcknowledged(h, w.cancelled(no, no+"-cancelled", 2))
			mu.Lock()
			defer mu.Unlock()
			if kind == consumer.KindProcessed {
				byMessage++
			}
		}()
		go func() { // the compensation job
			defer wg.Done()
			<-barrier
			cancelled := w.compensateUntilDone(w.name(no))
			mu.Lock()
			defer mu.Unlock()
			byJob += cancelled
		}()
		close(barrier)
	}
	wg.Wait()
	t.Logf("cancelled by their message: %d, by the job: %d", byMessage, byJob)

	assert.Equal(t, orders, byMessage+byJob, "each order cancelled by exactly one of them (message %d, job %d)", byMessage, byJob)
	assert.Equal(t, int64(orders), w.int(`SELECT COUNT(*) FROM orders WHERE order_no LIKE ? AND status = ? AND version = 2`,
		w.prefix+"o%", shop.StatusCancelled))
	assert.Equal(t, int64(orders), w.int(`SELECT COUNT(*) FROM inventory_change WHERE order_no LIKE ? AND quantity > 0`, w.prefix+"o%"),
		"one release per order")
	assert.Equal(t, int64(100), w.onHand(), "everything reserved was released once")
}

// deliverUntilAcknowledged redelivers d (as the broker would) while the chain asks for a retry — a
// deadlock between the racers is transient — and returns the acknowledged outcome's kind.
func (w *world) deliverUntilAcknowledged(h consumer.Handler, d *consumer.Delivery) consumer.Kind {
	d.MaxAttempts = 10
	for attempt := range 10 {
		d.Attempt = attempt
		o := w.through(h, d)
		if o.Kind.Acknowledges() {
			return o.Kind
		}
	}
	w.t.Errorf("event %s never acknowledged", d.EventID)
	return consumer.Kind(0)
}

// compensateUntilDone runs the compensation job on one order until it is no longer pending; a transient
// error repeats the pass. It returns 1 when the job cancelled the order.
func (w *world) compensateUntilDone(orderNo string) int {
	for range 10 {
		rep, err := w.shop.CancelUnpaid(w.ctx, w.db, []string{orderNo})
		if err != nil {
			if retry.Classify(err) != retry.ClassTransient {
				w.t.Errorf("compensation of %s: %v", orderNo, err)
				return 0
			}
			continue
		}
		if len(rep.Pending) == 0 {
			return len(rep.Cancelled)
		}
	}
	w.t.Errorf("compensation of %s still pending", orderNo)
	return 0
}

func TestCancelUnpaid_ReportsPendingAndMovedOrders(t *testing.T) {
	w := newWorld(t)
	w.seed()
	w.mustHandle(w.created("o1", 2), consumer.KindProcessed)
	w.mustHandle(w.created("o2", 2), consumer.KindProcessed)
	w.mustHandle(w.paid("o2", "paid", 2), consumer.KindProcessed)

	rep, err := w.shop.CancelUnpaid(w.ctx, w.db, []string{w.name("o1"), w.name("o2"), w.name("o3")})

	require.NoError(t, err)
	assert.Equal(t, []string{w.name("o1")}, rep.Cancelled)
	assert.Equal(t, []string{w.name("o2")}, rep.Moved, "paid: left alone")
	assert.Equal(t, []string{w.name("o3")}, rep.Pending, "not created yet")
	assert.Equal(t, int64(98), w.onHand(), "o1's 2 units back, o2's kept")
}
