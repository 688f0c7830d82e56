package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dedup/redisfast"
	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/outbox"
	"github.com/rmqguard/rmqguard/topics"
)

type runOptions struct {
	maxAttempts    int
	handlerTimeout time.Duration
	drainTimeout   time.Duration
	goroutines     int
	// dedupRetention is the janitor's dedup window; 0 runs no janitor.
	dedupRetention time.Duration
	// lagInterval is how often the consumer lag (rmqguard_consumer_lag) is read from the client.
	lagInterval time.Duration
	// dlqInterval is how often the group's DLQ is counted (rmqguard_dlq_letters_waiting); 0 counts never.
	dlqInterval time.Duration
	// gapRetries and gapDelayLevel configure middleware.Version's handling of an order event that arrives
	// before the events it follows.
	gapRetries, gapDelayLevel int
	// orderly selects orderly consumption (consumer.Config.Orderly); suspendTime is its pause after a failure.
	orderly     bool
	suspendTime time.Duration
	// redis is the Redis fast path of the dedup store (dedup/redisfast).
	redis redisOptions
	// logLevel is the lowest level logged: info shows retries, dead letters and the consumer's events;
	// debug adds one (sampled) line per acknowledged message.
	logLevel zapcore.Level
	// traceStdout writes the consumers' spans to stdout (tracing.go); OTEL_EXPORTER_OTLP_ENDPOINT exports them.
	traceStdout bool
}

func newRunCmd(s *settings) *cobra.Command {
	o := runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "consume the order, payment and cancellation events until SIGINT/SIGTERM; serve /metrics and /healthz",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return run(ctx, s, o)
		},
	}
	o.logLevel = zapcore.InfoLevel
	cmd.Flags().Var(&levelFlag{&o.logLevel}, "log-level",
		"lowest level logged: debug (adds a sampled line per acknowledged message), info (retries, dead letters, events), warn, error")
	cmd.Flags().IntVar(&o.maxAttempts, "max-attempts", 3, "redeliveries before the broker dead-letters a message (MaxReconsumeTimes)")
	cmd.Flags().DurationVar(&o.handlerTimeout, "handler-timeout", 10*time.Second, "deadline of one message's transaction")
	cmd.Flags().DurationVar(&o.drainTimeout, "drain-timeout", 15*time.Second, "how long shutdown waits for in-flight messages")
	cmd.Flags().IntVar(&o.goroutines, "goroutines", 16, "consume goroutines")
	cmd.Flags().DurationVar(&o.dedupRetention, "dedup-retention", 168*time.Hour,
		"dedup window of the janitor that purges old processed_event rows (one leader per group); 0 runs none")
	cmd.Flags().DurationVar(&o.lagInterval, "lag-interval", 10*time.Second,
		"how often the consumer lag (rmqguard_consumer_lag) is read from the client")
	cmd.Flags().DurationVar(&o.dlqInterval, "dlq-interval", dlq.DefaultMonitorInterval,
		"how often the group's DLQ is read on every master and its letters waiting for a replay counted (rmqguard_dlq_letters_waiting); 0: never")
	cmd.Flags().IntVar(&o.gapRetries, "gap-retries", 3,
		"deliveries an order event ahead of the stored version (a gap: an earlier event has not arrived) is retried before it is dead-lettered")
	cmd.Flags().IntVar(&o.gapDelayLevel, "gap-delay-level", 1, "broker delay level (1..18) of a version gap's retry (level 1: 1 s on a default broker)")
	cmd.Flags().BoolVar(&o.orderly, "orderly", false,
		"orderly consumption: each queue in send order, a failure suspends the queue (a version gap then waits in place instead of a delay level)")
	cmd.Flags().DurationVar(&o.suspendTime, "suspend-time", 0, "with --orderly: how long a queue pauses after a failure (default 1s)")
	cmd.Flags().StringVar(&o.redis.addr, "redis-addr", env("RMQGUARD_REDIS_ADDR", ""),
		"Redis of the dedup fast path, host:port (env RMQGUARD_REDIS_ADDR; empty: no fast path)")
	cmd.Flags().BoolVar(&o.redis.off, "no-redis", false, "run without the Redis fast path even when --redis-addr is set")
	cmd.Flags().StringVar(&o.redis.prefix, "redis-prefix", "rmqguard:", "prefix of the fast path's keys")
	cmd.Flags().DurationVar(&o.redis.ttl, "redis-ttl", 24*time.Hour, "time to live of a done key (at most --dedup-retention)")
	cmd.Flags().DurationVar(&o.redis.timeout, "redis-timeout", redisfast.DefaultTimeout, "bound of each Redis command; past it MySQL decides")
	cmd.Flags().BoolVar(&o.traceStdout, "trace-stdout", false,
		"write a span per message (OpenTelemetry, JSON) to stdout; OTEL_EXPORTER_OTLP_ENDPOINT exports them over OTLP/HTTP instead or as well")
	return cmd
}

// validate rejects flag values that would otherwise silently become the library's defaults.
func (o runOptions) validate() error {
	var errs []error
	if o.maxAttempts < 1 {
		errs = append(errs, fmt.Errorf("--max-attempts %d: must be ≥ 1", o.maxAttempts))
	}
	if o.goroutines < 1 {
		errs = append(errs, fmt.Errorf("--goroutines %d: must be ≥ 1", o.goroutines))
	}
	if o.handlerTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--handler-timeout %s: must be positive", o.handlerTimeout))
	}
	if o.dedupRetention < 0 {
		errs = append(errs, fmt.Errorf("--dedup-retention %s: must be ≥ 0 (0: no janitor)", o.dedupRetention))
	}
	if o.dlqInterval < 0 {
		errs = append(errs, fmt.Errorf("--dlq-interval %s: must be ≥ 0 (0: no DLQ census)", o.dlqInterval))
	}
	if o.drainTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--drain-timeout %s: must be positive", o.drainTimeout))
	}
	if o.gapRetries < 0 {
		errs = append(errs, fmt.Errorf("--gap-retries %d: must be ≥ 0", o.gapRetries))
	}
	if o.gapDelayLevel < 1 || o.gapDelayLevel > 18 {
		errs = append(errs, fmt.Errorf("--gap-delay-level %d: must be a broker delay level, 1..18", o.gapDelayLevel))
	}
	if err := o.redis.validate(o.dedupRetention); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func run(ctx context.Context, s *settings, o runOptions) error {
	nameServers := s.nameServerList()
	if len(nameServers) == 0 || s.mysqlDSN == "" {
		return errors.New("--namesrv (RMQGUARD_NAMESRV) and --mysql-dsn (RMQGUARD_MYSQL_DSN) are required")
	}
	if err := o.validate(); err != nil {
		return err
	}
	cred, namespace, err := s.clusterAccess()
	if err != nil {
		return err
	}
	cfg := consumer.Config{
		NameServers:          nameServers,
		Group:                s.group,
		Namespace:            namespace,
		Credentials:          cred,
		Subscriptions:        []consumer.Subscription{{Topic: s.topic, Expression: strings.Join(shop.EventTypes(), "||")}},
		MaxAttempts:          o.maxAttempts,
		ConsumeGoroutines:    o.goroutines,
		HandlerTimeout:       o.handlerTimeout,
		DrainTimeout:         o.drainTimeout,
		StartFromFirstOffset: true,
		LagInterval:          o.lagInterval,
		Orderly:              o.orderly,
		SuspendTime:          o.suspendTime,
	}
	// Fail on a bad configuration before touching the database or the broker.
	if err := cfg.Validate(); err != nil {
		return err
	}
	// The metrics port is bound first, so that a busy port fails the start instead of a running consumer.
	listener, err := net.Listen("tcp", s.metricsAddr)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	defer listener.Close()

	// One line per message's final decision; retries and dead letters are never sampled away (logger.go).
	log := newLogger(o.logLevel, zapcore.Lock(os.Stderr))
	defer func() { _ = log.Sync() }()
	consumer.BridgeClientLog(log)
	log.Info("settings", zap.Strings("namesrv", nameServers), zap.String("group", s.group), zap.String("topic", s.topic),
		zap.Int("max_attempts", o.maxAttempts), zap.Int("goroutines", o.goroutines),
		zap.Duration("handler_timeout", o.handlerTimeout), zap.Duration("drain_timeout", o.drainTimeout),
		zap.Duration("lag_interval", o.lagInterval), zap.Bool("orderly", o.orderly), zap.Bool("redis", o.redis.enabled()),
		zap.String("metrics", "http://"+s.metricsAddr+"/metrics"))

	db, err := sqlx.Open("mysql", s.mysqlDSN)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(o.goroutines + 4)
	if err := shop.Migrate(ctx, db.DB); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg)
	if err != nil {
		return err
	}
	// The store's transactions run on a pool of its own with autocommit off (BEGIN, claim, writes, COMMIT);
	// after-commit hooks that fail are logged (every line, see logger.go) and counted.
	store, err := dedup.NewStore(db, dedup.WithTxDSN(s.mysqlDSN), dedup.WithLogger(log), dedup.WithObserver(m))
	if err != nil {
		return err
	}
	defer func() { _ = store.Close() }()
	// A paid order's follow-ups (a LoyaltyPointsCredited message, a notification) are outbox rows written in
	// its transaction; the relay (in the consumer, WithBackground) sends and runs them after the commit
	// (followups.go).
	if _, err := outbox.Migrate(ctx, db.DB, store.TablePrefix()); err != nil {
		return err
	}
	stopJanitor, err := startJanitor(ctx, db, s.group, o.dedupRetention, log)
	if err != nil {
		return err
	}
	defer stopJanitor()

	// The business topic is created here (4 queues: its queue count is the producers' capacity decision);
	// the group's retry and DLQ topics are ensured by the consumer's Start (its default), so the
	// first retries come at once and the DLQ is readable (perm 6) for dead letters published with their reason.
	setupCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cluster := topics.Cluster{NameServers: nameServers, Namespace: namespace, Credentials: cred}
	if s.broker != "" {
		cluster.Brokers = []string{s.broker}
	}
	if _, err := topics.Ensure(setupCtx, cluster, topics.Topic{Name: s.topic, Queues: 4},
		topics.Topic{Name: s.loyaltyTopic, Queues: 4}); err != nil {
		return err
	}

	stopMonitor, err := startDLQMonitor(ctx, db, cluster, cfg.Group, m, o.dlqInterval, log)
	if err != nil {
		return err
	}
	defer stopMonitor()
	om, err := metrics.NewOutbox(reg)
	if err != nil {
		return err
	}
	ob, err := outbox.New(store, outbox.Config{NameServers: nameServers, Credentials: cred, Namespace: namespace, Logger: log, Observer: om,
		Effects: map[string]outbox.EffectFunc{
			effectNotify: notifyEffect(&http.Client{Timeout: 10 * time.Second}, "http://"+s.notifyAddr+"/notify")}})
	if err != nil {
		return err
	}
	s2, err := shop.New(shop.WithFollowUps(outboxFollowUps{ob: ob, topic: s.loyaltyTopic}))
	if err != nil {
		return err
	}
	// With a Redis address, Dedup asks Redis first (a done key: a duplicate without a transaction) and MySQL
	// otherwise; the store stays the health probe and Version's store: Redis never decides.
	fast, closeRedis, err := fastPath(ctx, store, reg, o.redis, log)
	if err != nil {
		return err
	}
	defer closeRedis()
	handler, err := chain(s2, store, fast, m, log, o)
	if err != nil {
		return err
	}

	// One span per message, the child of the trace context its properties carry; the outbox's messages carry
	// the span of the handling that sent them, so the loyalty group's spans continue the trace. The provider
	// is shut down (its buffered spans exported) after the consumers.
	tr, err := newTracing(ctx, o.traceStdout, os.Stdout)
	if err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tr.shutdown(stopCtx); err != nil {
			log.Warn("spans not exported", zap.Error(err))
		}
	}()

	// The dedup store is the health probe: while MariaDB is down or read-only, consumption pauses instead of
	// spending attempts; the metrics show the pause (rmqguard_consumption_paused). The metrics observe the
	// consumer's final decisions (messages, duplicates by cause, dead letters by reason, attempts), the
	// handlers in flight and the lag, polled every --lag-interval. The outbox relay runs with the consumer
	// (WithBackground): started by Start, stopped by Shutdown after the drain.
	c, err := consumer.New(cfg, handler, append(tr.options(), consumer.WithLogger(log),
		consumer.WithHealthProbe(store), consumer.WithObserver(m), consumer.WithBackground(ob.Run))...)
	if err != nil {
		return err
	}

	// The second group applies the LoyaltyPointsCredited events in batches: Dedup on the EVENT_ID the
	// outbox derived, a batch handler writing the loyalty_credit rows (keyed by the order) and the accounts'
	// points in one statement.
	loyaltyHandler, err := loyaltyChain(s2, store, fast, m, log)
	if err != nil {
		return err
	}
	loyalty, err := startLoyaltyConsumer(cfg, s, loyaltyHandler, store, m, log, tr.options()...)
	if err != nil {
		return err
	}

	var ready atomic.Bool
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		if err := db.PingContext(r.Context()); err != nil {
			http.Error(w, "database: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	srv := &http.Server{Addr: s.metricsAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(listener) }()

	if err := c.Start(); err != nil {
		_ = srv.Close()
		return err
	}
	if err := loyalty.Start(); err != nil {
		_ = srv.Close()
		return errors.Join(err, c.Shutdown(context.Background()))
	}
	ready.Store(true)
	log.Info("example consumer running", zap.String("group", s.group), zap.String("topic", s.topic))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-srvErr:
		serveErr = fmt.Errorf("metrics server: %w", serveErr)
		log.Error("metrics server stopped; shutting down", zap.Error(serveErr))
	}
	ready.Store(false)
	log.Info("shutting down")
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), o.drainTimeout+10*time.Second)
	defer cancelShutdown()
	err = errors.Join(c.Shutdown(shutdownCtx), loyalty.Shutdown(shutdownCtx))
	_ = srv.Shutdown(shutdownCtx)
	return errors.Join(serveErr, err)
}

// startDLQMonitor runs a dlq.Monitor of the consumer's group beside it when interval > 0: every interval it
// reads the group's DLQ on every master broker and exports the letters waiting for a replay
// (rmqguard_dlq_letters_waiting{group}; the alert RmqguardDLQLettersWaiting). The replay audit table is
// created first (it is empty until `rmqguard dlq replay` runs). The returned func stops it and waits for it.
func startDLQMonitor(ctx context.Context, db *sqlx.DB, cluster topics.Cluster, group string, m *metrics.Metrics, interval time.Duration, log *zap.Logger) (func(), error) {
	if interval == 0 {
		return func() {}, nil
	}
	if _, err := dlq.Migrate(ctx, db.DB); err != nil {
		return nil, fmt.Errorf("replay audit table: %w", err)
	}
	mon, err := dlq.NewMonitor(dlq.MonitorConfig{Cluster: cluster, Group: group, DB: db,
		// The chain reads the event ID from the EVENT_ID property, else the body's eventId (chain.go).
		EventIDProperty: shop.PropEventID, EventIDJSONField: "eventId",
		Interval: interval, Metrics: m, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("--dlq-interval: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mon.Run(ctx)
	}()
	return func() { cancel(); <-done }, nil
}

// startJanitor runs a dedup.Janitor for group beside the consumer (one leader among the group's processes)
// when retention > 0; the returned func stops it and waits for it. An invalid window is an error.
func startJanitor(ctx context.Context, db *sqlx.DB, group string, retention time.Duration, log *zap.Logger) (func(), error) {
	if retention == 0 {
		return func() {}, nil
	}
	j, err := dedup.NewJanitor(db, dedup.JanitorConfig{Scope: group, Retention: retention, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("--dedup-retention: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = j.Run(ctx)
	}()
	return func() { cancel(); <-done }, nil
}

// startLoyaltyConsumer builds the loyalty group's consumer (cfg with the group and subscription changed)
// around handler, with opts besides its own; Start is the caller's.
func startLoyaltyConsumer(cfg consumer.Config, s *settings, handler consumer.Handler, store *dedup.Store,
	m *metrics.Metrics, log *zap.Logger, opts ...consumer.Option) (*consumer.Consumer, error) {
	cfg.Group = s.loyaltyGroup()
	cfg.BatchSize = loyaltyBatchSize
	cfg.Subscriptions = []consumer.Subscription{{Topic: s.loyaltyTopic, Expression: shop.EventLoyaltyPointsCredited}}
	return consumer.New(cfg, handler, append(opts, consumer.WithLogger(log), consumer.WithHealthProbe(store), consumer.WithObserver(m))...)
}
