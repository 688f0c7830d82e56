package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/jmoiron/sqlx"
	"github.com/spf13/cobra"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/scrape"
)

type demoOptions struct {
	runID                string
	orders               int
	paidShare, dupShare  float64
	failOnce, early      int
	late, accounts, skus int
	ordered              bool
	timeout              time.Duration
	metricURL, promURL   string
	promWait             time.Duration
}

func newDemoCmd(s *settings) *cobra.Command {
	o := demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "send the order domain's events with duplicates, reordering, late events, a racing compensation job and a poison message to a running consumer, then verify exactly-once and reconcile",
		Long: `demo seeds stock and accounts for a run, then sends per order an OrderCreated and either OrderPaid +
PaymentCaptured or OrderCancelled: --dup-share of the events are re-sent as new messages (same EVENT_ID),
--fail-once OrderCreated events fail their first attempt, --early OrderPaids go before their OrderCreated (a
version gap the consumer retries), --late paid orders get a second OrderPaid of version 2 with a new event ID
at the end (stale), plus one poison message whose body is not JSON. While the cancellations are sent, a
compensation job (an order-timeout job, its own transactions) cancels the same orders: each is cancelled and
its stock released once, whoever wins. With --ordered (default) every event goes to the queue its order
number hashes to. It waits until the consumer (example-consumer run) has drained, then checks: every
event's effect once (orders, PAID, CANCELLED with one release each, payments, stock and balances as planned),
duplicates counted on /metrics ≥ re-sends, stale ≥ late OrderPaids + OrderCancelled messages of orders the job
cancelled first, the poison message alone of this run in
%DLQ%<group>, the paid orders' outbox follow-ups (every row sent, one loyalty credit per OrderPaid with the
planned points, every notification received by notify-receiver at least once and applied once per key), Prometheus's duplicate ratio over the consumer's life (duplicates / messages acknowledged,
increase() as in rule rmqguard:duplicate_ratio:increase1d) = /metrics', and the
reconciliation of the run ("reconcile: ok accounts=N skus=M"). The last line is "exactly-once: ok …" (exit 0)
or "exactly-once: FAILED …" (exit 1).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.runID == "" {
				o.runID = "demo" + time.Now().UTC().Format("20060102T150405")
			}
			if o.metricURL == "" {
				o.metricURL = "http://" + s.metricsAddr + "/metrics"
			}
			return demo(cmd.Context(), s, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.runID, "run-id", "", "prefix of this run's event IDs, orders, SKUs and accounts (default: demo<UTC time>)")
	f.IntVar(&o.orders, "orders", 600, "orders to create")
	f.Float64Var(&o.paidShare, "paid-share", 0.7, "share of orders paid; the others are cancelled")
	f.Float64Var(&o.dupShare, "dup-share", 0.1, "share of events re-sent as new messages with the same EVENT_ID")
	f.IntVar(&o.failOnce, "fail-once", 20, "OrderCreated events that fail their first attempt")
	f.IntVar(&o.early, "early", 20, "OrderPaid events sent before their OrderCreated")
	f.IntVar(&o.late, "late", 20, "paid orders that get a late OrderPaid (version 2, new event ID)")
	f.IntVar(&o.accounts, "accounts", 20, "accounts paying")
	f.IntVar(&o.skus, "skus", 17, "SKUs ordered")
	f.BoolVar(&o.ordered, "ordered", true, "send each order's events to one queue (hash of the order number)")
	f.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long to wait for the consumer to drain")
	f.StringVar(&o.metricURL, "metrics-url", "", "the consumer's /metrics (default http://<metrics-addr>/metrics)")
	f.StringVar(&o.promURL, "prometheus-url", "http://"+env("RMQGUARD_PROMETHEUS_ADDR", "127.0.0.1:9090"),
		"Prometheus scraping the consumer, for the duplicate ratio it computes (env RMQGUARD_PROMETHEUS_ADDR; empty: not queried)")
	f.DurationVar(&o.promWait, "prometheus-wait", 30*time.Second, "how long to wait for Prometheus to evaluate the ratio on a fresh scrape")
	return cmd
}

// demoRun is one demo run's state, shared by its steps.
type demoRun struct {
	s           *settings
	o           demoOptions
	nameServers []string
	db          *sqlx.DB
	shop        *shop.Shop
	plan        shop.DomainPlan
	// before holds the counters read before sending: duplicates and stale.
	before counts
	start  time.Time
}

// counts are the consumer's counters of this group and topic that the demo watches: duplicates, stale,
// the duplicates the Redis fast path answered (redisDuplicatesMetric) and the fast path's fall-throughs to
// MySQL (rmqguard_redis_fallbacks_total, all reasons; the process's, not only this group's). The Redis
// counters are 0 when the consumer runs without the fast path.
type counts struct {
	duplicates, stale        float64
	redisAnswered, fallbacks float64
}

func demo(ctx context.Context, s *settings, o demoOptions) error {
	rlog.SetLogLevel("fatal") // the client's own chatter would bury the report
	r, err := prepareDemo(ctx, s, o)
	if err != nil {
		return err
	}
	defer r.db.Close()
	waitForFirstScrape(ctx, o.promURL, o.metricURL, s.group, o.promWait)
	comp, err := r.send(ctx)
	if err != nil {
		return err
	}
	st, err := r.waitForDrain(ctx, comp)
	if err != nil {
		return err
	}
	return r.verdict(ctx, st, comp)
}

// prepareDemo plans the run, opens the database, seeds stock and accounts and reads the counters' baseline.
func prepareDemo(ctx context.Context, s *settings, o demoOptions) (*demoRun, error) {
	r := &demoRun{s: s, o: o, nameServers: s.nameServerList()}
	if len(r.nameServers) == 0 || s.mysqlDSN == "" {
		return nil, errors.New("--namesrv (RMQGUARD_NAMESRV) and --mysql-dsn (RMQGUARD_MYSQL_DSN) are required")
	}
	var err error
	if r.plan, err = (shop.DomainWorkload{RunID: o.runID, Topic: s.topic, Orders: o.orders, PaidShare: o.paidShare,
		DuplicateShare: o.dupShare, FailOnce: o.failOnce, EarlyPaid: o.early, LatePaid: o.late,
		Accounts: o.accounts, Skus: o.skus, Poison: true}).Plan(); err != nil {
		return nil, err
	}
	if r.shop, err = shop.New(); err != nil {
		return nil, err
	}
	if r.db, err = sqlx.Open("mysql", s.mysqlDSN); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := shop.Migrate(ctx, r.db.DB); err != nil {
		r.db.Close()
		return nil, err
	}
	if err := r.shop.Apply(ctx, r.db, r.plan.Seed); err != nil {
		r.db.Close()
		return nil, err
	}
	if r.before, err = r.counts(ctx); err != nil {
		r.db.Close()
		return nil, err
	}
	return r, nil
}

// counts reads the watched counters from the consumer's /metrics.
func (r *demoRun) counts(ctx context.Context) (counts, error) {
	dups, err := scrapeCounter(ctx, r.o.metricURL, "rmqguard_duplicates_total", r.s.group, r.s.topic)
	if err != nil {
		return counts{}, err
	}
	stale, err := scrapeCounter(ctx, r.o.metricURL, "rmqguard_stale_total", r.s.group, r.s.topic)
	if err != nil {
		return counts{}, err
	}
	answered, err := scrapeCounter(ctx, r.o.metricURL, redisDuplicatesMetric, r.s.group, r.s.topic)
	if err != nil {
		return counts{}, err
	}
	fallbacks, err := scrape.Counter(ctx, r.o.metricURL, "rmqguard_redis_fallbacks_total", nil)
	if err != nil {
		return counts{}, err
	}
	return counts{duplicates: dups, stale: stale, redisAnswered: answered, fallbacks: fallbacks}, nil
}

// since returns the counters' growth since the baseline.
func (r *demoRun) since(c counts) counts {
	return counts{duplicates: c.duplicates - r.before.duplicates, stale: c.stale - r.before.stale,
		redisAnswered: c.redisAnswered - r.before.redisAnswered, fallbacks: c.fallbacks - r.before.fallbacks}
}
