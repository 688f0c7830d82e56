package dedup_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
// stales. The loader holds each delivery long enough for the other to queue up behind its row. The
// duplicate's cause is read from the STALE row (F41): the same message, a redelivery.
func TestVersion_ConcurrentDeliveriesOfOneStaleEventCountOneStale(t *testing.T) {
	entered := make(chan struct{}, 2)
	load := func(ctx context.Context, _ *sqlx.Tx, _ string) (int64, error) {
		entered <- struct{}{}
		time.Sleep(300 * time.Millisecond) // the other delivery reaches its claim (or its record) meanwhile
		return 7, nil
	}
	w := newVersionWorld(t, middleware.VersionConfig{Load: load}, nil)
	msg := w.message("late-5", "o-1", 5)
	kinds := make([]consumer.Kind, 2)
	causes := make([]consumer.Cause, 2)
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
			kinds[i], causes[i] = o.Kind, o.Cause
			if o.Kind.Acknowledges() {
				w.metrics.Decided(d, consumer.Decision{Outcome: o, Chain: o})
			}
		}()
	}
	wg.Wait()
	assert.ElementsMatch(t, []consumer.Kind{consumer.KindStale, consumer.KindDuplicate}, kinds)
	for i, k := range kinds {
		if k == consumer.KindDuplicate {
			assert.Equal(t, consumer.CauseRedelivery, causes[i], "the STALE row holds this message's ID")
		}
	}
	assert.Equal(t, 1.0, w.staleTotal(), "one event, one stale")
	assert.Equal(t, dedup.ResultStale, w.status(t, "late-5"))
}

// F15 with Version (table mode): MySQL rolls the transaction back underneath the handler (a deadlock;
// here a ROLLBACK statement stands in for it), the handler carries on in a new transaction and returns
// Processed. Neither its write nor the version advance may commit without the dedup row: the message is
// retried, the stored version and the ledger are unchanged, and the redelivery applies the event once.
func TestF15_RollbackUnderTheHandlerWithVersionCommitsNothing(t *testing.T) {
	var w *versionWorld
	underneath := true
	w = newVersionWorld(t, middleware.VersionConfig{},
		func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
			if underneath {
				if _, err := tx.ExecContext(ctx, "ROLLBACK"); err != nil {
					return consumer.Outcome{}, err
				}
			}
			return consumer.Processed(), w.ledger.Append(ctx, tx, d.EventID)
		})
	w.seed(t, "old", 3)
	for _, c := range []struct {
		id      string
		version int64
	}{{"old", 4}, {"new", 1}} {
		underneath = true
		msg := w.message("e-"+c.id, c.id, c.version)
		d := consumer.NewDelivery(w.group, msg)
		d.MaxAttempts = 16
		o, err := w.h(context.Background(), d)
		assert.Error(t, err, c.id)
		assert.Equal(t, consumer.KindRetry, o.Kind, "%s: %v", c.id, o)
		v, _ := w.stored(t, c.id)
		assert.Equal(t, c.version-1, v, "%s: the version did not move", c.id)
		assert.Zero(t, w.applied(t, "e-"+c.id), c.id)
		assert.Equal(t, "", w.status(t, "e-"+c.id), c.id)

		underneath = false
		msg.ReconsumeTimes = 1
		o, err = w.h(context.Background(), consumer.NewDelivery(w.group, msg))
		require.NoError(t, err)
		assert.Equal(t, consumer.KindProcessed, o.Kind, c.id)
		v, _ = w.stored(t, c.id)
		assert.Equal(t, c.version, v, c.id)
	}
	w.ledger.RequireOncePerEvent(t, 2)
}

// F12, a gap whose earlier event arrives at the same moment: stored 1, v3 and v2 handled at once. Whatever
// the order the row lock gives them, v2 applies, v3 is applied or retried (a gap) and then applies on its
// redelivery: the aggregate ends at v3 with each event applied once.
func TestF12_GapAndItsMissingEventAtOnce(t *testing.T) {
	w := newVersionWorld(t, middleware.VersionConfig{}, nil)
	for round := range 5 {
		id := fmt.Sprintf("o-%d", round)
		w.seed(t, id, 1)
		msgs := []*primitive.MessageExt{w.message(id+"-v3", id, 3), w.message(id+"-v2", id, 2)}
		kinds := make([]consumer.Kind, 2)
		w.concurrently(msgs, kinds)
		assert.Equal(t, consumer.KindProcessed, kinds[1], "%s: v2 applies", id)
		if kinds[0] == consumer.KindRetry {
			msgs[0].ReconsumeTimes = 1
			o, err := w.h(context.Background(), consumer.NewDelivery(w.group, msgs[0]))
			require.NoError(t, err)
			kinds[0] = o.Kind
		}
		assert.Equal(t, consumer.KindProcessed, kinds[0], "%s: v3 applies, at once or on its redelivery", id)
		v, by := w.stored(t, id)
		assert.Equal(t, int64(3), v, id)
		assert.Equal(t, w.prefix+"-"+id+"-v3", by)
	}
	w.ledger.RequireOncePerEvent(t, 10)
}
