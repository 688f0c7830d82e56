package dedup_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// F40: a store on the application's pool (no WithTxDSN) accepts as many handlers at once as leave db at
// least one connection no transaction holds, read from db when asked (a limit set after NewStore counts);
// otherwise the error names the pool, the count and the fix.
func TestStore_F40_SharedPoolMustExceedTheHandlersAtOnce(t *testing.T) {
	db := testenv.MySQL(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)

	db.SetMaxOpenConns(20)
	require.NoError(t, store.Protocol().CheckConcurrency(19))
	for _, handlers := range []int{20, 40} {
		err := store.Protocol().CheckConcurrency(handlers)
		require.Error(t, err, "%d handlers on a pool of 20", handlers)
		for _, fix := range []string{"no WithTxDSN", "bounded to 20 connections", "dedup.Open(ctx, dsn)",
			"dedup.NewStore(db, dedup.WithTxDSN(dsn))", "(0: unbounded)"} {
			assert.Contains(t, err.Error(), fix)
		}
	}
	assert.Contains(t, store.Protocol().CheckConcurrency(40).Error(), "up to 40 handlers at once")
	assert.Contains(t, store.Protocol().CheckConcurrency(40).Error(), "db.SetMaxOpenConns(41) or more")

	db.SetMaxOpenConns(41)
	require.NoError(t, store.Protocol().CheckConcurrency(40), "a limit raised after NewStore counts")
	db.SetMaxOpenConns(0)
	require.NoError(t, store.Protocol().CheckConcurrency(1000), "an unbounded pool cannot run out")
}

// F40: orderly consumption (0: handlers not bounded by the Config) needs an unbounded db on the shared pool.
func TestStore_F40_UnboundedHandlersNeedAnUnboundedSharedPool(t *testing.T) {
	db := testenv.MySQL(t)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)

	err = store.Protocol().CheckConcurrency(0)
	require.Error(t, err, "testenv's pool is bounded to 64")
	assert.Contains(t, err.Error(), "a number of handlers at once that the consumer's Config does not bound")
	assert.Contains(t, err.Error(), "db.SetMaxOpenConns(0) (unbounded)")
	db.SetMaxOpenConns(0)
	require.NoError(t, store.Protocol().CheckConcurrency(0))
}

// F40: with a pool of its own (WithTxDSN, as Open gives) a handler cannot take the connection of a
// transaction from db, whatever the sizes.
func TestStore_F40_OwnPoolAcceptsAnyConcurrency(t *testing.T) {
	db := testenv.MySQL(t)
	db.SetMaxOpenConns(1)
	store, err := dedup.NewStore(db, dedup.WithTxDSN(testenv.MySQLDSN()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })

	require.NoError(t, store.Protocol().CheckConcurrency(1000))
	require.NoError(t, store.Protocol().CheckConcurrency(0))
}
