package dedup_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/retry"
)

// A store whose database predates the lease table (migration 00005 not run) fails a lease claim with
// ErrSchema naming the table and the fix, marked infrastructure: consumption pauses, no attempt is spent and
// nothing is dead-lettered until the migration runs; after it, the claim succeeds.
func TestClaimLease_MissingLeaseTableNamesTheFixAndSpendsNoAttempt(t *testing.T) {
	db := scratchDB(t)
	ctx := context.Background()
	_, err := dedup.Migrate(ctx, db.DB, dedup.WithTablePrefix("pay_"))
	require.NoError(t, err)
	_, err = db.Exec(`DROP TABLE pay_event_lease`)
	require.NoError(t, err)
	_, err = db.Exec(`DELETE FROM pay_rmqguard_dedup_db_version WHERE version_id = 5`)
	require.NoError(t, err)
	store, err := dedup.NewStore(db, dedup.WithTablePrefix("pay_"))
	require.NoError(t, err, "stores without lease mode keep working")

	m := &primitive.MessageExt{MsgId: "m1", Message: primitive.Message{Topic: "PAYMENT"}}
	d := testenv.NewDelivery("cg", m)
	d.EventID = testenv.Unique("ev")
	_, err = store.Protocol().(txproto.Leaser).ClaimLease(ctx, d, time.Minute)
	require.ErrorIs(t, err, dedup.ErrSchema)
	assert.Contains(t, err.Error(), `the lease table pay_event_lease is missing; fix: run dedup.Migrate with WithTablePrefix("pay_")`)
	assert.Equal(t, retry.ClassInfrastructure, retry.Classify(err))

	applied, err := dedup.Migrate(ctx, db.DB, dedup.WithTablePrefix("pay_"))
	require.NoError(t, err)
	assert.Equal(t, []string{"00005_event_lease.sql"}, applied)
	lease, err := store.Protocol().(txproto.Leaser).ClaimLease(ctx, d, time.Minute)
	require.NoError(t, err)
	assert.False(t, dedup.Takeover(txproto.WithLease(ctx, lease)), "a new lease, not a takeover")
	_, err = store.Protocol().(txproto.Leaser).ClaimLease(ctx, d, time.Minute)
	assert.ErrorIs(t, err, dedup.ErrLeaseHeld, "a second claim while the first lease is live")
	require.NoError(t, lease.Release(ctx))
	_, err = store.Protocol().(txproto.Leaser).ClaimLease(ctx, d, time.Minute)
	assert.NoError(t, err, "a released lease is claimed anew")
}
