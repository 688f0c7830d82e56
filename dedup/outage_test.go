package dedup_test

import (
	"context"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/retry"
)

// connectionID returns the server thread ID of the connection db hands out next.
func connectionID(t *testing.T, ctx context.Context, q interface {
	GetContext(context.Context, any, string, ...any) error
}) int64 {
	t.Helper()
	var id int64
	require.NoError(t, q.GetContext(ctx, &id, `SELECT CONNECTION_ID()`))
	return id
}

// F20 on the store alone: a read-only server fails the probe and the claim; the connection that saw it is
// closed, while one that rolled back for another reason goes back to the pool. F19: a BEGIN against a
// stopped server is an infrastructure error.
// It runs on db's pool and on the store's own (dedup.WithTxDSN).
func TestF20_ReadOnlyServerFailsTheProbeAndItsConnectionIsDropped(t *testing.T) {
	ctx := context.Background()
	in := testenv.MariaDBInstance(t, "gate-dedup", 13310)
	db := in.Open()
	db.SetMaxOpenConns(1) // the connection a transaction returns is the one the next statement gets
	_, err := dedup.Migrate(ctx, db.DB)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		opts []dedup.Option
	}{{"shared pool", nil}, {"own pool", []dedup.Option{dedup.WithTxDSN(in.DSN)}}} {
		t.Run(c.name, func(t *testing.T) {
			store, err := dedup.NewStore(db, c.opts...)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, store.Close()) })
			readOnlyDropsTheConnection(t, ctx, in, store)
		})
	}
}

// readOnlyDropsTheConnection is TestF20_ReadOnlyServerFailsTheProbeAndItsConnectionIsDropped on store,
// whose transaction pool holds one connection.
func readOnlyDropsTheConnection(t *testing.T, ctx context.Context, in *testenv.Instance, store *dedup.Store) {
	require.NoError(t, store.Probe(ctx), "a writable server is healthy")
	next := func() int64 { // the connection the store's next transaction gets
		txn, err := store.Protocol().Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = txn.Rollback() }()
		return connectionID(t, ctx, txn.SQLTx())
	}

	claimOn := func(eventID string) (int64, error) {
		txn, err := store.Protocol().Begin(ctx)
		require.NoError(t, err)
		id := connectionID(t, ctx, txn.SQLTx())
		d := testenv.NewDelivery("cg", &primitive.MessageExt{Message: primitive.Message{Topic: "ORDER"}, MsgId: "m-" + eventID})
		d.EventID = eventID
		err = store.Protocol().Claim(ctx, txn, d)
		_ = txn.RollbackAfter(err)
		return id, err
	}
	kept, err := claimOn(testenv.Unique("e"))
	require.NoError(t, err)
	assert.Equal(t, kept, next(), "a rolled-back transaction's connection goes back to the pool")

	in.SQL("SET GLOBAL read_only = 1")
	probeErr := store.Probe(ctx)
	require.Error(t, probeErr, "a read-only server is not healthy")
	assert.True(t, mysqlerr.ReadOnly(probeErr))
	assert.Equal(t, retry.ClassInfrastructure, retry.Classify(probeErr))
	seen, err := claimOn(testenv.Unique("e"))
	require.Error(t, err)
	assert.True(t, mysqlerr.ReadOnly(err), "the claim met the read-only server: %v", err)
	assert.Equal(t, retry.ClassInfrastructure, retry.Classify(err))
	assert.NotEqual(t, seen, next(), "the connection that saw the read-only server was dropped")

	in.SQL("SET GLOBAL read_only = 0")
	require.NoError(t, store.Probe(ctx), "writable again")

	in.Stop()
	_, err = store.Protocol().Begin(ctx)
	require.Error(t, err)
	assert.Equal(t, retry.ClassInfrastructure, retry.Classify(err), "BEGIN against a stopped server: %v", err)
	require.Error(t, store.Probe(ctx))
	in.Restart()
	require.NoError(t, store.Probe(ctx), "the pool reconnects after the restart")
}
