// Command purgebench measures dedupsql.Purge against consumers (F22): it inserts -rows old processed_event rows
// for a scope of its own, measures the latency of the real claim path (Begin, Claim, the business insert
// of the example domain, Confirm, Commit, through middleware.Dedup) with -workers goroutines without a
// purge, then again while dedupsql.Purge deletes the old rows, and prints the purge's rows/s, the latency
// percentiles with and without, their ratios, and how many claims failed with 1205 or 1213. It cleans up
// its rows afterwards. Run by `make bench-purge` on the test database (RMQGUARD_TEST_MYSQL_DSN).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql" // the MySQL driver for sqlx
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// options are the command's flags.
type options struct {
	dsn      string
	rows     int
	workers  int
	baseline time.Duration
	batch    int
	pause    time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.dsn, "dsn", testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN), "MySQL DSN")
	flag.IntVar(&o.rows, "rows", 1_000_000, "old processed_event rows to insert and purge (a multiple of 100000, or below it)")
	flag.IntVar(&o.workers, "workers", 8, "goroutines claiming new events")
	flag.DurationVar(&o.baseline, "baseline", 20*time.Second, "how long to measure claims without a purge")
	flag.IntVar(&o.batch, "batch", dedupsql.DefaultBatch, "purge batch size")
	flag.DurationVar(&o.pause, "pause", 0, "purge pause between batches")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "purgebench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	db, err := sqlx.Open("mysql", o.dsn)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	db.SetMaxOpenConns(o.workers + 4)
	if err := shop.Migrate(ctx, db.DB); err != nil {
		return err
	}
	scope := testenv.Unique("bench-purge")
	defer cleanup(db, scope)
	start := time.Now()
	if err := insertOld(ctx, db, scope, o.rows); err != nil {
		return err
	}
	fmt.Printf("inserted %d old rows for scope %s in %s\n", o.rows, scope, time.Since(start).Round(time.Millisecond))

	l, err := newLoad(db, scope, o.workers)
	if err != nil {
		return err
	}
	without := l.measure(ctx, func(ctx context.Context) error { return sleepCtx(ctx, o.baseline) })
	var res dedupsql.Result
	with := l.measure(ctx, func(ctx context.Context) error {
		var err error
		res, err = dedupsql.Purge(ctx, db, dedupsql.Config{Scope: scope, OlderThan: 168 * time.Hour,
			BatchSize: o.batch, Pause: o.pause}, nil)
		return err
	})
	if with.err != nil {
		return with.err
	}
	report(o, res, without, with)
	return nil
}

// report prints the figures.
func report(o options, res dedupsql.Result, without, with stats) {
	fmt.Printf("purge: %d rows in %d batches of %d in %s: %.0f rows/s\n",
		res.Rows, res.Batches, o.batch, res.Elapsed.Round(time.Millisecond), res.RowsPerSecond())
	for _, s := range []struct {
		name string
		st   stats
	}{{"without purge", without}, {"with purge   ", with}} {
		fmt.Printf("claims %s: %6d in %5.1fs (%5.0f/s)  p50 %6.2fms  p95 %6.2fms  p99 %6.2fms  1205=%d 1213=%d other errors=%d\n",
			s.name, s.st.n, s.st.elapsed.Seconds(), float64(s.st.n)/s.st.elapsed.Seconds(),
			ms(s.st.p50), ms(s.st.p95), ms(s.st.p99), s.st.lockWait, s.st.deadlock, s.st.other)
	}
	fmt.Printf("latency ratio with/without: p50 %.2f  p95 %.2f  p99 %.2f\n",
		ratio(with.p50, without.p50), ratio(with.p95, without.p95), ratio(with.p99, without.p99))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// insertOld inserts n processed_event rows of scope consumed 200 hours ago, 100,000 per statement (MariaDB's
// Sequence engine generates them).
func insertOld(ctx context.Context, db *sqlx.DB, scope string, n int) error {
	for done := 0; done < n; {
		chunk := min(100_000, n-done)
		_, err := db.ExecContext(ctx, fmt.Sprintf(`INSERT INTO processed_event
			(consumer_group, event_id, topic, msg_id, consumed_at, result_status)
			SELECT ?, CONCAT('old-', ? + seq), 'T', 'm', UTC_TIMESTAMP(6) - INTERVAL 200 HOUR - INTERVAL (? + seq) MICROSECOND, 'SUCCESS'
			FROM seq_1_to_%d`, chunk), scope, done, done)
		if err != nil {
			return fmt.Errorf("insert old rows: %w", err)
		}
		done += chunk
	}
	return nil
}

// cleanup deletes what the run wrote: the scope's rows and the business rows of its events.
func cleanup(db *sqlx.DB, scope string) {
	for _, q := range []string{
		`DELETE FROM processed_event WHERE consumer_group = ? LIMIT 10000`,
		`DELETE FROM inventory_change WHERE order_no LIKE CONCAT(?, '-%') LIMIT 10000`,
		`DELETE FROM orders WHERE order_no LIKE CONCAT(?, '-%') LIMIT 10000`,
	} {
		for {
			r, err := db.Exec(q, scope)
			if err != nil {
				fmt.Fprintln(os.Stderr, "purgebench: cleanup:", err)
				break
			}
			if n, _ := r.RowsAffected(); n == 0 {
				break
			}
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
