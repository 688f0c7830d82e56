package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/jmoiron/sqlx"
	"github.com/spf13/cobra"

	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/rmqadmin"
	"github.com/rmqguard/rmqguard/internal/scrape"
	"github.com/rmqguard/rmqguard/internal/shop"
)

type demoOptions struct {
	runID     string
	messages  int
	dupShare  float64
	failOnce  int
	timeout   time.Duration
	metricURL string
	promURL   string
	promWait  time.Duration
}

func newDemoCmd(s *settings) *cobra.Command {
	o := demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "send OrderCreated events with duplicates, transient failures and a poison message to a running consumer, then verify exactly-once",
		Long: `demo sends --messages OrderCreated messages, of which --dup-share re-send an earlier event as a new
message (new message ID, same EVENT_ID), --fail-once fail their first attempt, plus one poison message
whose body is not JSON. It then waits until the consumer (example-consumer run) has drained them and checks:
effects in MariaDB = distinct events, duplicates counted on /metrics ≥ duplicates sent, and the poison message
alone (of this run) in %DLQ%<group>. Before its verdict it prints the group's duplicate ratio as Prometheus
computed it (recording rule rmqguard:duplicate_ratio:total, deploy/prometheus/rules.yml, evaluated on a scrape
taken after the drain) next to duplicates / handled from /metrics; they must agree. The last line is "exactly-once: ok …" (exit 0) or "exactly-once: FAILED …" (exit 1).`,
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
	f.StringVar(&o.runID, "run-id", "", "prefix of this run's event IDs and order numbers (default: demo<UTC time>)")
	f.IntVar(&o.messages, "messages", 2000, "messages to send, re-sends included, poison excluded")
	f.Float64Var(&o.dupShare, "dup-share", 0.1, "share of messages that re-send an earlier event")
	f.IntVar(&o.failOnce, "fail-once", 20, "events that fail their first attempt")
	f.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long to wait for the consumer to drain")
	f.StringVar(&o.metricURL, "metrics-url", "", "the consumer's /metrics (default http://<metrics-addr>/metrics)")
	f.StringVar(&o.promURL, "prometheus-url", "http://"+env("RMQGUARD_PROMETHEUS_ADDR", "127.0.0.1:9090"),
		"Prometheus scraping the consumer, for the duplicate ratio it computes (env RMQGUARD_PROMETHEUS_ADDR; empty: not queried)")
	f.DurationVar(&o.promWait, "prometheus-wait", 30*time.Second, "how long to wait for Prometheus to evaluate the ratio on a fresh scrape")
	return cmd
}

func demo(ctx context.Context, s *settings, o demoOptions) error {
	rlog.SetLogLevel("fatal") // the client's own chatter would bury the report
	nameServers := s.nameServerList()
	if len(nameServers) == 0 || s.mysqlDSN == "" {
		return errors.New("--namesrv (RMQGUARD_NAMESRV) and --mysql-dsn (RMQGUARD_MYSQL_DSN) are required")
	}
	plan, err := shop.Workload{RunID: o.runID, Topic: s.topic, Messages: o.messages, DuplicateShare: o.dupShare,
		FailOnce: o.failOnce, Poison: true}.Plan()
	if err != nil {
		return err
	}
	db, err := sqlx.Open("mysql", s.mysqlDSN)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer db.Close()
	dupsBefore, err := scrapeCounter(ctx, o.metricURL, "rmqguard_duplicates_total", s.group, s.topic)
	if err != nil {
		return err
	}

	start := time.Now()
	if err := send(ctx, nameServers, s.group, plan); err != nil {
		return err
	}
	fmt.Printf("sent %d messages to %s: %d distinct events, %d re-sent with new message IDs, %d failing once, 1 poison (%.1fs)\n",
		len(plan.Messages), s.topic, plan.Events, plan.Duplicates, o.failOnce, time.Since(start).Seconds())

	prefix := o.runID + "-o"
	deadline := time.Now().Add(o.timeout)
	var orders, reservations int
	var dupCount float64
	var letters []*primitive.MessageExt
	for {
		if orders, reservations, err = shop.Effects(ctx, db, prefix); err != nil {
			return err
		}
		dupsNow, err := scrapeCounter(ctx, o.metricURL, "rmqguard_duplicates_total", s.group, s.topic)
		if err != nil {
			return err
		}
		dupCount = dupsNow - dupsBefore
		if orders >= plan.Events && dupCount >= float64(plan.Duplicates) {
			if letters, err = runLetters(ctx, nameServers, s.group, o.runID); err != nil {
				return err
			}
			if len(letters) > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			break
		}
		fmt.Printf("waiting: effects %d/%d, duplicates counted %.0f/%d\n", orders, plan.Events, dupCount, plan.Duplicates)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	// Let stray redeliveries, if any, arrive before the final count.
	time.Sleep(3 * time.Second)
	if orders, reservations, err = shop.Effects(ctx, db, prefix); err != nil {
		return err
	}
	if letters, err = runLetters(ctx, nameServers, s.group, o.runID); err != nil {
		return err
	}

	ratio := checkPrometheusRatio(ctx, o.promURL, o.metricURL, s.group, o.promWait)

	var problems []string
	if ratio.problem != "" {
		problems = append(problems, ratio.problem)
	}
	if orders != plan.Events || reservations != plan.Events {
		problems = append(problems, fmt.Sprintf("effects: %d orders and %d reservations for %d events", orders, reservations, plan.Events))
	}
	if dupCount < float64(plan.Duplicates) {
		problems = append(problems, fmt.Sprintf("duplicates counted %.0f < %d sent", dupCount, plan.Duplicates))
	}
	poisonOK := len(letters) == 1 && letters[0].GetProperty("EVENT_ID") == plan.PoisonEventID
	if !poisonOK {
		ids := make([]string, 0, len(letters))
		for _, l := range letters {
			ids = append(ids, l.GetProperty("EVENT_ID"))
		}
		problems = append(problems, fmt.Sprintf("DLQ of this run holds %v, want only %s", ids, plan.PoisonEventID))
	} else {
		fmt.Printf("dead letter: event %s, reason %q\n", plan.PoisonEventID, letters[0].GetProperty(dlq.PropReason))
	}
	fmt.Printf("MariaDB: %d orders, %d inventory reservations; /metrics: %.0f duplicates; %%DLQ%%%s: %d letters of this run (%.1fs)\n",
		orders, reservations, dupCount, s.group, len(letters), time.Since(start).Seconds())
	if ratio.line != "" {
		fmt.Println(ratio.line)
	}
	summary := fmt.Sprintf("events=%d effects=%d duplicates=%.0f dead-lettered=%d", plan.Events, orders, dupCount, len(letters))
	if len(problems) > 0 {
		fmt.Println("problems: " + strings.Join(problems, "; "))
		fmt.Println("exactly-once: FAILED " + summary)
		return errors.New("exactly-once check failed")
	}
	fmt.Println("exactly-once: ok " + summary)
	return nil
}

func send(ctx context.Context, nameServers []string, group string, plan shop.Plan) error {
	p, err := rmqadmin.StartProducer(nameServers, group+"-demo-producer")
	if err != nil {
		return err
	}
	defer func() { _ = p.Shutdown() }()
	for _, msg := range plan.Messages {
		res, err := p.SendSync(ctx, msg)
		if err != nil {
			return fmt.Errorf("send %s: %w", msg.GetProperty("EVENT_ID"), err)
		}
		if res.Status != primitive.SendOK {
			return fmt.Errorf("send %s: status %d", msg.GetProperty("EVENT_ID"), res.Status)
		}
	}
	return nil
}

// runLetters returns the dead letters of this run (KEYS or EVENT_ID starting with the run ID).
func runLetters(ctx context.Context, nameServers []string, group, runID string) ([]*primitive.MessageExt, error) {
	all, err := dlq.Read(ctx, nameServers, group, 0)
	if err != nil {
		return nil, err
	}
	var mine []*primitive.MessageExt
	for _, m := range all {
		if strings.HasPrefix(m.GetProperty("EVENT_ID"), runID+"-") || strings.HasPrefix(m.GetKeys(), runID+"-") {
			mine = append(mine, m)
		}
	}
	return mine, nil
}

// scrapeCounter reads one counter with labels group and topic from the consumer's /metrics; 0 when absent.
func scrapeCounter(ctx context.Context, url, name, group, topic string) (float64, error) {
	v, err := scrape.Counter(ctx, url, name, map[string]string{"group": group, "topic": topic})
	if err != nil {
		return 0, fmt.Errorf("%w (is `example-consumer run` running?)", err)
	}
	return v, nil
}
