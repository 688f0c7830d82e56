package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/rmqadmin"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// TestBenchE2E_ShortRunDrainsEveryMessageAndCleansUp runs the benchmark for real on a small backlog: each
// variant of the default list, in its order (the batch variants rmqguard-batch, handwritten-batch and
// batch-ceiling, and duplicates-redis on the shared Redis included), reports every message drained, the table is
// printed with the Redis ratio, and afterwards the run's tables, dedup rows, topic and Redis keys are gone.
func TestBenchE2E_ShortRunDrainsEveryMessageAndCleansUp(t *testing.T) {
	rdb := testenv.Redis(t)
	o, err := parseFlags([]string{"-messages", "500", "-rounds", "1", "-rss-backlog", "0", "-stall", "20s",
		"-namesrv", testenv.NameServer(t), "-broker", testenv.Broker(t), "-redis", rdb.Options().Addr,
		"-redis-timeout", "1s"}) // the default 50 ms times out now and then on a loaded 2-core machine
	require.NoError(t, err)
	db, err := sqlx.Open("mysql", o.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		testenv.Unavailable(t, "MariaDB at RMQGUARD_MYSQL_DSN: %v", err)
	}

	var out strings.Builder
	results, err := run(ctx, o, &out)
	require.NoError(t, err, out.String())
	t.Log("\n" + out.String())

	require.Equal(t, strings.Split(defaultVariants, ","), o.variants)
	require.Len(t, results, len(o.variants))
	for i, r := range results {
		require.Equal(t, o.variants[i], r.variant)
		require.Equal(t, 500, r.messages, r.variant)
		require.Positive(t, r.elapsed, r.variant)
		require.Empty(t, r.na, r.variant)
	}
	require.Contains(t, out.String(), "x baseline median")
	require.Contains(t, out.String(), "duplicates-redis / duplicates (medians): ")
	require.NotContains(t, out.String(), "Redis fell through", "every duplicate must be answered by Redis")

	runName := strings.TrimSuffix(strings.Fields(out.String())[1], ":")
	require.True(t, strings.HasPrefix(runName, "be2e-"), out.String())
	var tables, rows int
	require.NoError(t, db.GetContext(ctx, &tables, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name LIKE ?`, tableName(runName)+"%"))
	require.Zero(t, tables, "tables of the run left behind")
	require.NoError(t, db.GetContext(ctx, &rows, `SELECT COUNT(*) FROM processed_event WHERE consumer_group LIKE ?`,
		runName+"-%"))
	require.Zero(t, rows, "processed_event rows of the run left behind")
	route, err := rmqadmin.TopicRoute(ctx, []string{testenv.NameServer(t)}, "BENCHE2E_"+strings.ReplaceAll(runName, "-", "_"))
	require.True(t, err != nil || len(route) == 0, "the run's topic still has a route: %v", route)
	keys, err := rdb.Keys(ctx, "rmqguard-benche2e:"+runName+":*").Result()
	require.NoError(t, err)
	require.Empty(t, keys, "Redis keys of the run left behind")
}
