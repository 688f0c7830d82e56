package shop_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
)

// The first stock row of a SKU is created by whichever order reserves it first; orders of a brand-new SKU
// reserving at the same moment must not deadlock on that creation (a deadlock is retried, but it spends an
// attempt and shows as a transient error: on a fresh database it made e2e counts of transient errors flaky).
func TestDomain_ConcurrentFirstReservationsOfANewSkuDoNotDeadlock(t *testing.T) {
	for round := range 3 {
		w := newWorld(t) // no seed: the SKU has no inventory row yet
		const orders = 16
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, orders)
		kinds := make([]consumer.Kind, orders)
		for i := range orders {
			d := w.created("o"+string(rune('a'+i)), 1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				o, err := w.handleConcurrently(d)
				kinds[i], errs[i] = o.Kind, err
			}()
		}
		close(start)
		wg.Wait()
		for i := range orders {
			require.NoError(t, errs[i], "round %d order %d", round, i)
			assert.Equal(t, consumer.KindProcessed, kinds[i], "round %d order %d", round, i)
		}
		assert.Equal(t, int64(-orders), w.onHand(), "round %d: every reservation applied once", round)
	}
}

// handleConcurrently is handle for use off the test goroutine: errors are returned, never required.
func (w *world) handleConcurrently(d *consumer.Delivery) (consumer.Outcome, error) {
	tx, err := w.db.BeginTxx(w.ctx, nil)
	if err != nil {
		return consumer.Outcome{}, err
	}
	o, err := w.shop.Handle(w.ctx, tx, d)
	if err != nil || o.Kind != consumer.KindProcessed {
		return o, errors.Join(err, tx.Rollback())
	}
	return o, tx.Commit()
}
