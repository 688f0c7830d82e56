package dedup_test

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/retry"
)

// claimOnce claims (group, eventID) in a transaction of its own and commits it.
func claimOnce(t *testing.T, f *fixture, group, eventID string) error {
	t.Helper()
	ctx := context.Background()
	txn, err := f.store.Protocol().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txn.Rollback() }()
	d := testenv.NewDelivery(group, &primitive.MessageExt{MsgId: "m", Message: primitive.Message{Topic: "ORDER"}})
	d.EventID = eventID
	if err := f.store.Protocol().Claim(ctx, txn, d); err != nil {
		return err
	}
	require.NoError(t, f.store.Protocol().Confirm(ctx, txn, d))
	return txn.Commit()
}

// The column sizes are the limits, inclusive: an event ID of MaxEventIDLength characters (multi-byte ones
// included) and a group of MaxGroupLength are stored; one character more is refused as permanent before
// any SQL runs.
func TestClaim_F11_LengthLimitsAreInclusive(t *testing.T) {
	f := newFixture(t)
	longest := f.prefix + "-" + strings.Repeat("é", dedupsql.MaxEventIDLength-len(f.prefix)-1)
	require.NoError(t, claimOnce(t, f, f.group, longest), "an event ID of exactly MaxEventIDLength characters")
	ok, err := f.store.Processed(context.Background(), f.group, longest)
	require.NoError(t, err)
	assert.True(t, ok)

	err = claimOnce(t, f, f.group, longest+"x")
	require.Error(t, err)
	assert.Equal(t, retry.ClassPermanent, retry.Classify(err))
	ok, err = f.store.Processed(context.Background(), f.group, longest+"x")
	require.NoError(t, err)
	assert.False(t, ok, "the refused event was not recorded")

	group := f.group + "-" + strings.Repeat("g", dedup.MaxGroupLength-len(f.group)-1)
	require.NoError(t, claimOnce(t, f, group, f.prefix+"-e"), "a group of exactly MaxGroupLength characters")
	err = claimOnce(t, f, group+"g", f.prefix+"-e")
	require.Error(t, err)
	assert.Equal(t, retry.ClassPermanent, retry.Classify(err))
}

// A finished transaction hands its connection back to the pool healthy: kept (not discarded) and with
// autocommit on again, so that other users of the pool never write inside a transaction nobody commits.
func TestTxn_ConnectionGoesBackToThePoolWithAutocommitOn(t *testing.T) {
	f := newFixture(t)
	f.db.SetMaxOpenConns(1)
	f.db.SetMaxIdleConns(1)
	ctx := context.Background()
	for name, finish := range map[string]func(txproto.Txn) error{
		"commit":   func(txn txproto.Txn) error { return txn.Commit() },
		"rollback": func(txn txproto.Txn) error { return txn.Rollback() },
	} {
		t.Run(name, func(t *testing.T) {
			var before int
			require.NoError(t, f.db.Get(&before, `SELECT CONNECTION_ID()`))
			txn, err := f.store.Protocol().Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, finish(txn))

			var autocommit, after int
			require.NoError(t, f.db.Get(&autocommit, `SELECT @@autocommit`))
			require.NoError(t, f.db.Get(&after, `SELECT CONNECTION_ID()`))
			assert.Equal(t, 1, autocommit, "autocommit is on again")
			assert.Equal(t, before, after, "the same connection was kept in the pool, not discarded")
		})
	}
}
