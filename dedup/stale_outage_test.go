package dedup_test

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// S7 with F19/F20: the store fails between the stale decision and its STALE row (RecordStale). That is the
// store's failure, not the message's: the outcome is Unavailable (consumption pauses, no attempt spent),
// never a retry that spends one (and on the last delivery ends in the DLQ as "retries exhausted"); the
// connection that met the read-only server is closed, not returned to the pool. On a MariaDB of the test's
// own, which the loader makes read-only, then stops.
func TestVersion_StoreFailingWhileRecordingStaleIsUnavailable(t *testing.T) {
	ctx := context.Background()
	in := testenv.MariaDBInstance(t, "stale-outage", 13361)
	db := in.Open()
	db.SetMaxOpenConns(1) // the connection RecordStale used is the one the next statement gets, unless dropped
	_, err := dedup.Migrate(ctx, db.DB)
	require.NoError(t, err)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	var fault func()
	version, err := middleware.Version(store, middleware.VersionConfig{AggregateType: "order",
		Load: func(context.Context, *sqlx.Tx, string) (int64, error) {
			fault()
			return 7, nil // every event below is stale
		}})
	require.NoError(t, err)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	h := testenv.Must(middleware.Chain(dedup.Handle(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil
	}), middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store)), version))
	w := &versionWorld{group: testenv.Unique("cg"), prefix: testenv.Unique("v")}
	handle := func(eventID string, attempt int) consumer.Outcome {
		d := testenv.NewDelivery(w.group, w.message(eventID, "o-1", 5))
		d.Attempt, d.MaxAttempts = attempt, 3
		o, _ := h.Handle(ctx, d)
		return o
	}

	fault = func() { in.SQL("SET GLOBAL read_only = 1") }
	before := connectionID(t, ctx, db)
	o := handle("late-ro", 3)
	assert.Equal(t, consumer.KindUnavailable, o.Kind, "read-only while recording: %v", o)
	in.SQL("SET GLOBAL read_only = 0")
	assert.NotEqual(t, before, connectionID(t, ctx, db), "the connection that met the read-only server was closed")

	fault = func() { in.Stop() }
	o = handle("late-down", 3)
	assert.Equal(t, consumer.KindUnavailable, o.Kind, "stopped while recording, on the last delivery: %v", o)
	in.Restart()
	fault = func() {}
	assert.Equal(t, consumer.KindStale, handle("late-down", 1).Kind, "recorded once the store is back")
}
