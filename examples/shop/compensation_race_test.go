package shop_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/examples/shop"
)

// S6 under load, in both orders: 120 orders on one SKU, one barrier for everything; the compensation job
// walks the orders first to last in passes while 8 consumers deliver the OrderCancelled messages last to
// first (so they meet in the middle and contend on the SKU row), each message delivered twice (a re-send).
// Every order is cancelled by exactly one of them, released once, and the domain reconciles.
func TestShop_CompensationRaceBothDirectionsReleasesOnce(t *testing.T) {
	const orders, consumers = 120, 8
	w := newWorld(t)
	w.seed()
	h := w.chain(3)
	names := make([]string, orders)
	for i := range orders {
		names[i] = w.name(fmt.Sprintf("o%d", i))
		require.Equal(t, consumer.KindProcessed, w.through(h, w.created(fmt.Sprintf("o%d", i), 1)).Kind)
	}
	barrier := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	kinds := map[consumer.Kind]int{}
	work := make(chan int)
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-barrier
			for i := range work {
				k := w.deliverUntilAcknowledged(h, w.cancelled(fmt.Sprintf("o%d", i), fmt.Sprintf("o%d-cancelled", i), 2))
				mu.Lock()
				kinds[k]++
				mu.Unlock()
			}
		}()
	}
	go func() {
		<-barrier
		for i := orders - 1; i >= 0; i-- {
			work <- i
			work <- i // the re-send: same event ID, a new message
		}
		close(work)
	}()
	byJob := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-barrier
		pending := names
		for pass := 0; len(pending) > 0 && pass < 50; pass++ {
			rep, err := w.shop.CancelUnpaid(w.ctx, w.db, pending)
			byJob += len(rep.Cancelled)
			if err != nil {
				t.Logf("pass %d: %v", pass, err)
			}
			done := map[string]bool{}
			for _, no := range append(rep.Cancelled, rep.Moved...) {
				done[no] = true
			}
			var next []string
			for _, no := range pending {
				if !done[no] {
					next = append(next, no)
				}
			}
			pending = next
		}
		assert.Empty(t, pending, "the job left orders pending")
	}()
	close(barrier)
	wg.Wait()
	t.Logf("job %d, messages %v", byJob, kinds)

	assert.Equal(t, orders, byJob+kinds[consumer.KindProcessed], "each order cancelled once: job %d, messages %v", byJob, kinds)
	assert.Equal(t, byJob, kinds[consumer.KindStale], "one stale per order the job cancelled (its re-send is a duplicate)")
	assert.Equal(t, orders, kinds[consumer.KindDuplicate], "each second delivery is a duplicate")
	assert.Equal(t, int64(orders), w.int(`SELECT COUNT(*) FROM inventory_change WHERE order_no LIKE ? AND quantity > 0`, w.prefix+"o%"))
	assert.Equal(t, int64(100), w.onHand())
	r := w.reconcile()
	assert.True(t, r.OK(), "%v", lines(r))
	assert.Equal(t, shop.StatusCancelled, func() string { s, _ := w.order("o0"); return s }())
}
