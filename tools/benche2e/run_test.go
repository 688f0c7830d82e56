package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// TestBenchE2E_ShortRunDrainsEveryMessageAndCleansUp runs the benchmark for real on a small backlog: each
// variant of the default list, in its order (the batch variants rmqguard-batch, handwritten-batch,
// batch-ceiling, handwritten-multirow and rmqguard-batch-handler, the hot-row ones, and duplicates-redis on
// the shared Redis included), reports every message drained, the hot-row ledgers and balances add up, the
// table is printed with the Redis ratio, the ratios with targets and the consumer's decisions, and
// afterwards the run's tables, dedup rows, topics and Redis keys are gone.
func TestBenchE2E_ShortRunDrainsEveryMessageAndCleansUp(t *testing.T) {
	rdb := testenv.Redis(t)
	o, err := parseFlags([]string{"-messages", "500", "-rounds", "1", "-rss-backlog", "0", "-stall", "20s",
		"-namesrv", testenv.NameServer(t), "-broker", testenv.Broker(t), "-redis", rdb.Options().Addr,
		"-redis-timeout", "1s"}) // the default 50 ms times out now and then on a loaded 2-core machine
	require.NoError(t, err)
	db, err := sqlx.Open("mysql", o.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
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
	require.Contains(t, out.String(), "\nratios of medians and their targets:\n")
	require.Contains(t, out.String(), "\nrmqguard's consumer per 1,000 messages")
	require.Contains(t, out.String(), "\nhotrow-batch lost batches per 1,000 messages (median): ")
	require.NotContains(t, out.String(), "hot-row check FAILED")
	for _, r := range results {
		onRmqguard := strings.HasPrefix(r.variant, "rmqguard") || strings.HasPrefix(r.variant, "hotrow") || strings.HasPrefix(r.variant, "duplicates")
		require.Equal(t, onRmqguard, r.counts != nil, "%s: the consumer's counts", r.variant)
	}

	runName := strings.TrimSuffix(strings.Fields(out.String())[1], ":")
	require.True(t, strings.HasPrefix(runName, "be2e-"), out.String())
	var tables, rows int
	require.NoError(t, db.GetContext(ctx, &tables, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name LIKE ?`, tableName(runName)+"%"))
	require.Zero(t, tables, "tables of the run left behind")
	require.NoError(t, db.GetContext(ctx, &rows, `SELECT COUNT(*) FROM processed_event WHERE consumer_group LIKE ?`,
		runName+"-%"))
	require.Zero(t, rows, "processed_event rows of the run left behind")
	for _, topic := range []string{"BENCHE2E_", "BENCHE2E_HOT_"} {
		route, err := rmq.TopicRoute(ctx, []string{testenv.NameServer(t)}, topic+strings.ReplaceAll(runName, "-", "_"))
		require.True(t, err != nil || len(route) == 0, "the run's topic %s still has a route: %v", topic, route)
	}
	keys, err := rdb.Keys(ctx, "rmqguard-benche2e:"+runName+":*").Result()
	require.NoError(t, err)
	require.Empty(t, keys, "Redis keys of the run left behind")
}
