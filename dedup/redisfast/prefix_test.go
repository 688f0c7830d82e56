package redisfast_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dedup/redisfast"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// With the Redis fast path: a store on prefixed tables and one on the default tables, whose
// layers share the Redis key prefix, each process an event once; the first's done key never answers for
// the second (which would acknowledge the event there without applying it). The default key is unchanged.
func TestTablePrefix_RedisDoneKeysOfTwoSchemasDoNotCollide(t *testing.T) {
	db := testenv.MySQL(t)
	rdb := testenv.Redis(t)
	prefix := strings.ReplaceAll(testenv.Unique("rf"), "-", "_") + "_"
	err := dedupsql.CheckPrefix(prefix)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, table := range dedupsql.Names(prefix) {
			_, _ = db.Exec(`DROP TABLE IF EXISTS ` + table) // this test's own tables
		}
	})
	_, err = dedup.Migrate(context.Background(), db.DB, dedup.WithTablePrefix(prefix))
	require.NoError(t, err)
	prefixed, err := dedup.NewStore(db, dedup.WithTablePrefix(prefix))
	require.NoError(t, err)
	plain, err := dedup.NewStore(db)
	require.NoError(t, err)

	a := newFixtureOn(t, db, prefixed, rdb, time.Minute)
	b := newFixtureOn(t, db, plain, rdb, time.Minute)
	b.group = a.group
	shared := a.prefix + ":"
	b.layer, err = redisfast.New(plain, rdb, redisfast.Config{Prefix: shared, TTL: time.Minute, Timeout: testTimeout, Observer: b.obs})
	require.NoError(t, err)
	ev := a.prefix + "-e"
	t.Cleanup(func() { _ = rdb.Del(context.Background(), a.key(ev), b.key(ev)).Err() })
	t.Cleanup(func() { _, _ = db.Exec(`DELETE FROM processed_event WHERE consumer_group = ?`, a.group) })

	n := strconv.Itoa(len(a.group))
	assert.Equal(t, shared+"done:"+prefix+"@"+n+":"+a.group+":"+ev, a.key(ev))
	assert.Equal(t, shared+"done:"+n+":"+a.group+":"+ev, b.key(ev), "the default key is unchanged")

	ha, hb := a.chain(t, nil), b.chain(t, nil)
	for _, step := range []struct {
		f    *fixture
		h    consumer.Handler
		want consumer.Kind
	}{{a, ha, consumer.KindProcessed}, {a, ha, consumer.KindDuplicate}, {b, hb, consumer.KindProcessed}, {b, hb, consumer.KindDuplicate}} {
		o, err := step.f.handle(step.h, step.f.msg(ev))
		require.NoError(t, err)
		assert.Equal(t, step.want, o.Kind)
	}
	assert.Equal(t, 1, a.ledger.Count(t, ev), "one effect through the prefixed schema")
	assert.Equal(t, 1, b.ledger.Count(t, ev), "one effect through the default schema")
}
