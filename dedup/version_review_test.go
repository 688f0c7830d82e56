package dedup_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/middleware"
)

// F12 (table mode): a handler that finds its event's effect already there (a compensation job applied the
// action first: dedup.ActionAlreadyApplied) returns consumer.Duplicate, which Dedup commits with the dedup
// row. The event has taken effect, so the aggregate is at its version: the next version applies, it is
// not a gap (which strict mode would retry and then dead-letter).
func TestF12_HandlersOwnDuplicateMovesTheStoredVersion(t *testing.T) {
	var w *versionWorld
	w = newVersionWorld(t, middleware.VersionConfig{},
		func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			if d.Version == 1 {
				return consumer.Duplicate(), nil // the effect exists already (e.g. ActionAlreadyApplied)
			}
			return consumer.Processed(), w.ledger.Append(ctx, tx, d.EventID)
		})
	assert.Equal(t, consumer.KindDuplicate, w.send(t, "e-1", "o-1", 1, 0).Kind)
	assert.Equal(t, dedup.ResultSuccess, w.status(t, "e-1"), "the handler's duplicate commits the dedup row")
	v, by := w.stored(t, "o-1")
	assert.Equal(t, int64(1), v, "the event took effect: the aggregate is at its version")
	assert.Equal(t, w.prefix+"-e-1", by)

	assert.Equal(t, consumer.KindProcessed, w.send(t, "e-2", "o-1", 2, 0).Kind, "v2 follows v1: no gap")
	w.ledger.RequireOncePerEvent(t, 1)
}

// S7 and S2 at once: two deliveries of one stale event handled concurrently. The second waits for the
// first's claim, is handled after the first rolled back, and records its decision after the first did:
// the event is stale once and a duplicate once (rmqguard_stale_total counts the event once), never two
// stales. The loader holds each delivery long enough for the other to queue up behind its row.
func TestS7_ConcurrentDeliveriesOfOneStaleEventCountOneStale(t *testing.T) {
	entered := make(chan struct{}, 2)
	load := func(ctx context.Context, _ *sqlx.Tx, _ string) (int64, error) {
		entered <- struct{}{}
		time.Sleep(300 * time.Millisecond) // the other delivery reaches its claim (or its record) meanwhile
		return 7, nil
	}
	w := newVersionWorld(t, middleware.VersionConfig{Load: load}, nil)
	msg := w.message("late-5", "o-1", 5)
	kinds := make([]consumer.Kind, 2)
	var wg sync.WaitGroup
	for i := range kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 1 {
				<-entered // the first delivery holds its claim
			}
			d := consumer.NewDelivery(w.group, msg)
			d.MaxAttempts = 16
			o, err := w.h(context.Background(), d)
			assert.NoError(t, err)
			kinds[i] = o.Kind
			if o.Kind.Acknowledges() {
				w.metrics.Decided(d, consumer.Decision{Outcome: o, Chain: o})
			}
		}()
	}
	wg.Wait()
	assert.ElementsMatch(t, []consumer.Kind{consumer.KindStale, consumer.KindDuplicate}, kinds)
	assert.Equal(t, 1.0, w.staleTotal(), "one event, one stale")
	assert.Equal(t, dedup.ResultStale, w.status(t, "late-5"))
}
