// Command benche2e is the project's end-to-end throughput benchmark: it produces a backlog of
// OrderCreated-like messages on the real broker (a topic of its own with 4 queues) and drains it with each
// variant, interleaved over -rounds so that machine noise hits all of them: raw (the client's push consumer
// with a no-op handler, the ceiling), baseline (a hand-written consumer: one sqlx transaction per message
// with a dedup row and a business row), rmqguard (consumer.New and the standard chain), rmqguard-outbox
// (rmqguard plus one outbox message per event, relayed in the same process; its drain ends when every row is
// sent, and it reports the commit-to-SEND_OK latency), rmqguard-batch
// (BatchSize 32), handwritten-batch (the baseline's rows of a whole 32-message callback in one transaction,
// no savepoints), batch-ceiling (one transaction per 32-message callback with only the business rows, no
// dedup), handwritten-multirow (per 32-message callback one transaction with one multi-row claim of the
// dedup rows and one multi-row INSERT of the business rows: the hand-written ceiling with dedup),
// rmqguard-batch-handler (BatchSize 32 with a batch handler, dedup.HandleBatch, writing the business rows
// in one multi-row INSERT), hotrow and hotrow-batch (a backlog of its own over 50 accounts, drained by
// rmqguard around a handler that appends a ledger row and upserts the account's balance, with BatchSize 1
// and 32), duplicates (a backlog whose events were all processed already, drained by rmqguard) and
// duplicates-redis (the same with the store wrapped in the Redis fast path, dedup/redisfast, every event's
// done key written first; n/a when Redis at -redis does not answer). Every variant drains with a fresh
// consumer group from the first offset, the same consume goroutines and the same MySQL pool (with the
// driver's interpolateParams, as rmqguard's own transaction pool has it, unless -interpolate-params=false),
// into tables of its own. The rate is the distinct messages handled (for rmqguard: acknowledged by the
// consumer's final decision) divided by the time from the first to the last. It prints one row per variant
// and round, the medians and the ratios to the baseline, the ratios the batch work is held to, the lost
// batches, retries and dead letters per 1,000 messages of the variants on rmqguard's consumer, then the
// resident memory of the process while the rmqguard variant drains a -rss-backlog backlog. Topics, tables
// and dedup rows it created, and its Redis keys, are removed at the end, also after Ctrl-C. Run by
// `make bench-e2e`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
	_ "github.com/go-sql-driver/mysql" // the MySQL driver for sqlx
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dedup/redisfast"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// options are the command's flags.
type options struct {
	nameServers    string
	broker         string
	dsn            string
	interpolate    bool // the application pool's interpolateParams (appDSN)
	redisAddr      string
	redisTimeout   time.Duration
	messages       int
	rounds         int
	variants       []string
	goroutines     int
	handlerTimeout time.Duration
	rssBacklog     int
	stall          time.Duration
	sharedTxPool   bool
	cpuProfile     string
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "benche2e:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benche2e: -cpuprofile:", err)
			os.Exit(2)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	if _, err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benche2e:", err)
		stop()
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// parseFlags reads and validates the flags.
func parseFlags(args []string) (options, error) {
	var o options
	var list string
	fs := flag.NewFlagSet("benche2e", flag.ContinueOnError)
	fs.StringVar(&o.nameServers, "namesrv", testenv.Env("RMQGUARD_NAMESRV", "127.0.0.1:9876"), "name servers, comma separated")
	fs.StringVar(&o.broker, "broker", testenv.Env("RMQGUARD_BROKER_ADDR", "127.0.0.1:10911"), "broker address (topics are created and deleted there)")
	fs.StringVar(&o.dsn, "dsn", testenv.Env("RMQGUARD_MYSQL_DSN", "rmqguard:rmqguard@tcp(127.0.0.1:3306)/rmqguard?parseTime=true"), "MySQL DSN")
	fs.BoolVar(&o.interpolate, "interpolate-params", true, "the application's pool (the hand-written variants' transactions) with the driver's interpolateParams on, as rmqguard's own pool (dedup.WithTxDSN) has it; false: -dsn as given")
	fs.StringVar(&o.redisAddr, "redis", testenv.Env("RMQGUARD_REDIS_ADDR", testenv.DefaultRedisAddr), "Redis of the duplicates-redis variant (host:port)")
	fs.DurationVar(&o.redisTimeout, "redis-timeout", redisfast.DefaultTimeout, "bound of each Redis command of the duplicates-redis variant (redisfast.Config.Timeout, at most 1s)")
	fs.IntVar(&o.messages, "messages", 20_000, "messages in the backlog each variant drains")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each drains every variant once, in -variants order")
	fs.StringVar(&list, "variants", defaultVariants, "variants to run, comma separated")
	fs.IntVar(&o.goroutines, "goroutines", 20, "consume goroutines of every variant (the MySQL pool has 4 more connections)")
	fs.DurationVar(&o.handlerTimeout, "handler-timeout", 10*time.Second, "rmqguard's handler deadline (consumer.Config.HandlerTimeout, reported by middleware.Deadline(0)); 0: the consumer's default, 30s")
	fs.IntVar(&o.rssBacklog, "rss-backlog", 100_000, "backlog the rmqguard variant drains while its resident memory is sampled; 0 skips it")
	fs.BoolVar(&o.sharedTxPool, "shared-tx-pool", false, "rmqguard's transactions on the application's pool (autocommit toggled and the claim read back per message) instead of the store's own (dedup.WithTxDSN)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the whole run to this file")
	fs.DurationVar(&o.stall, "stall", time.Minute, "give up a drain after this long without a new message")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.variants, err = parseVariants(list); err != nil {
		return o, err
	}
	return o, o.validate()
}

// validate rejects flag values that cannot work, naming the flag.
func (o options) validate() error {
	var errs []error
	if o.messages < 1 {
		errs = append(errs, fmt.Errorf("-messages %d: must be ≥ 1", o.messages))
	}
	if o.rounds < 1 {
		errs = append(errs, fmt.Errorf("-rounds %d: must be ≥ 1", o.rounds))
	}
	if o.goroutines < 1 || o.goroutines > 1000 {
		errs = append(errs, fmt.Errorf("-goroutines %d: must be 1..1000 (the consumer's range)", o.goroutines))
	}
	if o.rssBacklog < 0 {
		errs = append(errs, fmt.Errorf("-rss-backlog %d: must be ≥ 0 (0 skips the measurement)", o.rssBacklog))
	}
	if o.handlerTimeout < 0 {
		errs = append(errs, fmt.Errorf("-handler-timeout %s: must be ≥ 0", o.handlerTimeout))
	}
	if o.stall <= 0 {
		errs = append(errs, fmt.Errorf("-stall %s: must be positive", o.stall))
	}
	return errors.Join(errs...)
}

// run sets the environment up, drains the rounds, prints the table and the memory figure to w, and cleans
// up. It returns the results for tests.
func run(ctx context.Context, o options, w io.Writer) ([]result, error) {
	rlog.SetLogLevel("error")
	env, closeEnv, err := open(ctx, o, w)
	if err != nil {
		return nil, err
	}
	defer closeEnv()
	b := backlog{topic: "BENCHE2E_" + strings.ReplaceAll(env.run, "-", "_"), prefix: env.run + "-e-", n: o.messages}
	start := time.Now()
	if err := b.produce(ctx, env); err != nil {
		return nil, err
	}
	pool := "DSN as given"
	if o.interpolate {
		pool = "interpolateParams on"
	}
	fmt.Fprintf(w, "run %s: %d messages on %s (%d queues) in %s; %d consume goroutines, pool %d (%s)\n",
		env.run, b.n, b.topic, backlogQueues, time.Since(start).Round(time.Millisecond), o.goroutines, o.goroutines+4, pool)
	if err := produceHot(ctx, env, o.variants, b.n); err != nil {
		return nil, err
	}
	results, err := rounds(ctx, env, o, b)
	if len(results) > 0 {
		// Also after an interrupted run: the rounds that finished are worth seeing.
		fmt.Fprintln(w)
		if werr := writeTable(w, results, variantBaseline); werr != nil {
			return results, errors.Join(err, werr)
		}
	}
	if err != nil {
		return results, err
	}
	if o.rssBacklog > 0 {
		fmt.Fprintln(w)
		if err := measureRSS(ctx, env, o, w); err != nil {
			return results, err
		}
	}
	return results, nil
}

// open connects to the database and the broker and starts the producer; the returned function cleans up
// what the run created and closes them.
func open(ctx context.Context, o options, w io.Writer) (*environment, func(), error) {
	dsn, err := appDSN(o.dsn, o.interpolate)
	if err != nil {
		return nil, nil, err
	}
	db, err := sqlx.Open("mysql", dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("open database: %w", err)
	}
	// With -shared-tx-pool the store's transactions take db's connections: consumer.New wants more than the
	// consumer's handlers at once (ConsumeGoroutines for the topic and for %RETRY%<group>).
	conns := o.goroutines + 4
	if o.sharedTxPool {
		conns = 2*o.goroutines + 4
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if _, err := dedup.Migrate(ctx, db.DB); err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	env := &environment{nameServers: strings.Split(o.nameServers, ","), broker: o.broker, db: db,
		run: testenv.Unique("be2e"), cleanup: &cleanup{}, log: w}
	env.producer, err = rmq.StartProducer(env.nameServers, env.run+"-producer")
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	if slices.Contains(o.variants, variantOutbox) {
		env.outboxTopic = "BENCHE2E_OB_" + strings.ReplaceAll(env.run, "-", "_")
		if err := rmq.EnsureTopic(ctx, env.nameServers, env.broker, env.outboxTopic, backlogQueues); err != nil {
			_ = env.producer.Shutdown()
			_ = db.Close()
			return nil, nil, err
		}
		env.cleanup.topic(env.outboxTopic)
	}
	if slices.Contains(o.variants, variantDuplicatesRedis) {
		env.rdb, env.rdbErr = openRedis(ctx, o.redisAddr)
	}
	return env, func() {
		_ = env.producer.Shutdown()
		env.cleanup.run(env, w)
		if env.rdb != nil {
			_ = env.rdb.Close()
		}
		_ = db.Close()
	}, nil
}

// rounds drains b with every variant, round after round.
func rounds(ctx context.Context, env *environment, o options, b backlog) ([]result, error) {
	all := variants()
	var results []result
	for round := 1; round <= o.rounds; round++ {
		for _, name := range o.variants {
			group := fmt.Sprintf("%s-%s-r%d", env.run, name, round)
			r, err := drain(ctx, env, o, b, all[name], group)
			r.variant, r.round = name, round
			var na errNotAvailable
			if errors.As(err, &na) {
				r.na = na.why
				err = nil
			}
			if err != nil {
				return results, fmt.Errorf("%s round %d: %w", name, round, err)
			}
			results = append(results, r)
			fmt.Fprintf(env.log, "  round %d %-22s %s\n", round, name, describe(r))
		}
	}
	return results, nil
}

// describe is a progress line of one result.
func describe(r result) string {
	if r.na != "" {
		return "n/a: " + r.na
	}
	s := fmt.Sprintf("%d msgs in %.2fs = %.0f msgs/s", r.messages, r.elapsed.Seconds(), r.rate())
	if c := r.counts; c != nil && (c.lost > 0 || c.retries > 0 || c.deadLetter > 0) {
		s += fmt.Sprintf("; %d lost batches, %d retries, %d dead letters", c.lost, c.retries, c.deadLetter)
	}
	if r.latency != nil {
		s += fmt.Sprintf(" (consumed in %.2fs; commit to SEND_OK p50 %s ms, p99 %s ms)", r.consumed.Seconds(),
			millis(r.latency.p50), millis(r.latency.p99))
	}
	if r.cpu != "" {
		s += "; cpu s: " + r.cpu
	}
	return s
}

// drain runs one variant on b with group and waits until every message was handled and, for a variant with
// work after the handler (tracker.settle), until that work is done too: its time counts in the elapsed.
func drain(ctx context.Context, env *environment, o options, b backlog, start drainFunc, group string) (result, error) {
	tr := newTracker(b.n)
	procs := cpuProcesses()
	before := sampleCPU(procs)
	stop, err := start(ctx, env, o, b, group, tr)
	if err != nil {
		return result{}, err
	}
	n, elapsed, err := tr.wait(ctx, o.stall)
	r := result{messages: n, elapsed: elapsed, counts: tr.consumer.snapshot()}
	if err == nil && tr.settle != nil {
		var end time.Time
		var lat latencies
		if end, lat, err = tr.settle(ctx, o.stall); err == nil {
			r.consumed = r.elapsed
			r.elapsed = max(r.elapsed, end.Sub(time.Unix(0, tr.first.Load())))
			r.latency = &lat
		}
	}
	r.cpu = sampleCPU(procs).since(before, procs)
	stop()
	return r, err
}

// measureRSS produces a backlog of o.rssBacklog messages, then drains it with the rmqguard variant while
// it samples the process's VmRSS every 100 ms, and prints the highest sample and VmHWM (reset before the
// drain when the kernel allows) in MB. The process also holds the benchmark's producer and pool.
func measureRSS(ctx context.Context, env *environment, o options, w io.Writer) error {
	b := backlog{topic: "BENCHE2E_RSS_" + strings.ReplaceAll(env.run, "-", "_"), prefix: env.run + "-m-", n: o.rssBacklog}
	if err := b.produce(ctx, env); err != nil {
		return err
	}
	debug.FreeOSMemory()
	reset := resetPeak()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	peak := sampleRSS(sctx, 100*time.Millisecond)
	r, err := drain(ctx, env, o, b, variants()[variantRmqguard], env.run+"-rss")
	if err != nil {
		return fmt.Errorf("rss drain: %w", err)
	}
	hwm, err := statusKB("VmHWM")
	if err != nil {
		return err
	}
	note := "since the drain began"
	if !reset {
		note = "since the process started: clear_refs refused"
	}
	fmt.Fprintf(w, "rmqguard RSS draining a %d-message backlog (%s): peak sampled VmRSS %.1f MB, VmHWM %.1f MB (%s)\n",
		b.n, describe(r), float64(peak())/1024, float64(hwm)/1024, note)
	return nil
}
