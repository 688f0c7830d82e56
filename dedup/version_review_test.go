package dedup_test

import (
	"context"
	"testing"

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
