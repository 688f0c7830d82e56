package redisfast_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// F40: the layer answers the concurrency check of the store it wraps (its Redis calls take no database
// connection), so that consumer.New refuses a chain whose Dedup holds the layer of a store on a bounded
// application pool as it refuses the store itself.
func TestLayer_F40_ForwardsTheStoresConcurrencyCheck(t *testing.T) {
	f := newFixture(t, testenv.Redis(t), time.Hour)
	f.db.SetMaxOpenConns(20)

	err := f.layer.Protocol().CheckConcurrency(40)
	require.Error(t, err)
	assert.Equal(t, f.store.Protocol().CheckConcurrency(40).Error(), err.Error())
	require.NoError(t, f.layer.Protocol().CheckConcurrency(19))

	own, err := dedup.NewStore(f.db, dedup.WithTxDSN(testenv.MySQLDSN()))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, own.Close()) })
	require.NoError(t, newFixtureOn(t, f.db, own, f.rdb, time.Hour).layer.Protocol().CheckConcurrency(40), "a store on a pool of its own")
}
