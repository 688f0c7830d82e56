package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql" // the MySQL driver for sqlx
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/internal/rmqadmin"
	"github.com/rmqguard/rmqguard/internal/shop"
)

// Env is what the scenarios run against.
type Env struct {
	// ConsumerBin is a built cmd/example-consumer.
	ConsumerBin string
	// NameServers are the name servers of the broker the consumers and the load use ("host:port").
	NameServers []string
	// BrokerAddr is that broker's address, for creating the run's topics.
	BrokerAddr string
	// MariaDB is the consumers' dedicated database server, the target of the database faults.
	MariaDB *MariaDB
	// DSN connects to MariaDB's database rmqguard (go-sql-driver format).
	DSN string
	// Broker is the dedicated broker instance, nil on a shared broker (broker-restart then fails).
	Broker *Broker
	// LogDir receives one folder per scenario with the consumers' logs.
	LogDir string
	// Out receives progress lines (indented, so the verdict lines stand out).
	Out io.Writer
}

// consumerCount is the number of example consumer processes in the group.
const consumerCount = 2

// Run runs one scenario: a group of two example consumers on a topic of the run's own, the workload sent at
// a steady rate, the fault applied at FaultAt, then the drain and the verification against MariaDB and the
// DLQ. Everything it starts is stopped before it returns. Problems of the harness itself (the stack does not
// answer) are reported as the scenario's problems, so the caller always gets a verdict.
func Run(ctx context.Context, env Env, sc Scenario) Result {
	r := &runner{env: env, sc: sc, res: Result{Scenario: sc.Name}, start: time.Now()}
	if err := r.run(ctx); err != nil {
		r.res.Problems = append(r.res.Problems, err.Error())
	}
	r.res.Elapsed = time.Since(r.start)
	return r.res
}

// runner holds one scenario run's state.
type runner struct {
	env       Env
	sc        Scenario
	res       Result
	start     time.Time
	want      Expectation
	topic     string
	db        *sqlx.DB
	consumers *Consumers
	sampler   *Sampler
}

func (r *runner) say(format string, args ...any) {
	_, _ = fmt.Fprintf(r.env.Out, "  [%s +%5.1fs] %s\n", r.sc.Name, time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

func (r *runner) run(ctx context.Context) error {
	if r.sc.NeedsBroker && r.env.Broker == nil {
		return errors.New("needs a broker instance of its own (make chaos starts one)")
	}
	plan, err := r.prepare(ctx)
	if err != nil {
		return err
	}
	defer r.db.Close()
	if err := r.startConsumers(ctx); err != nil {
		return errors.Join(err, r.consumers.Stop())
	}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.sampler.Run(sampleCtx, 500*time.Millisecond) })
	defer func() { stopSampling(); wg.Wait() }()

	if err := r.loadWithFault(ctx, plan); err != nil {
		return errors.Join(err, r.consumers.Stop())
	}
	r.drainAndVerify(ctx)
	if err := r.consumers.Stop(); err != nil {
		r.res.Problems = append(r.res.Problems, err.Error())
	}
	return nil
}

// prepare plans the workload, migrates the schema once (two consumers migrating a fresh database at the
// same moment would race) and creates the run's topic and the group's retry and DLQ topics.
func (r *runner) prepare(ctx context.Context) (shop.Plan, error) {
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:10]
	run := "chaos-" + r.sc.Name + "-" + id
	r.topic = "RMQGUARD_CHAOS_" + id
	group := "rmqguard-chaos-" + r.sc.Name + "-" + id
	plan, err := shop.Workload{RunID: run, Topic: r.topic, Messages: r.sc.Messages, DuplicateShare: 0.1,
		FailOnce: r.sc.Messages / 100, Poison: true}.Plan()
	if err != nil {
		return plan, err
	}
	r.want = Expectation{RunID: run, Group: group, Events: plan.Events, PoisonEventID: plan.PoisonEventID}
	r.res.Events = plan.Events
	if r.db, err = sqlx.Open("mysql", r.env.DSN); err != nil {
		return plan, fmt.Errorf("open %s: %w", r.env.DSN, err)
	}
	if err := shop.Migrate(ctx, r.db.DB); err != nil {
		_ = r.db.Close()
		return plan, err
	}
	setup, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := rmqadmin.EnsureTopic(setup, r.env.NameServers, r.env.BrokerAddr, r.topic, 4); err != nil {
		_ = r.db.Close()
		return plan, err
	}
	if err := rmqadmin.EnsureGroupTopics(setup, r.env.NameServers, r.env.BrokerAddr, group); err != nil {
		_ = r.db.Close()
		return plan, err
	}
	r.say("run %s: %d messages (%d events, %d re-sends, %d failing once, 1 poison) at %.0f/s to %s, group %s",
		run, len(plan.Messages), plan.Events, plan.Duplicates, r.sc.Messages/100, r.sc.Rate, r.topic, group)
	return plan, nil
}

// startConsumers starts the group's processes; their logs go to LogDir/<scenario>/.
func (r *runner) startConsumers(ctx context.Context) error {
	logDir := filepath.Join(r.env.LogDir, r.sc.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("log dir: %w", err)
	}
	r.consumers = NewConsumers(ConsumerArgs{Bin: r.env.ConsumerBin, NameServers: strings.Join(r.env.NameServers, ","),
		Broker: r.env.BrokerAddr, DSN: r.env.DSN, Group: r.want.Group, Topic: r.topic, LogDir: logDir}, consumerCount)
	r.sampler = NewSampler(r.want.Group, r.consumers.Targets)
	for slot := range consumerCount {
		if err := r.consumers.Start(ctx, slot); err != nil {
			return err
		}
	}
	r.say("%d consumers healthy (logs in %s)", consumerCount, logDir)
	return nil
}

// loadWithFault sends the workload and applies the fault at FaultAt; it returns when both are done.
func (r *runner) loadWithFault(ctx context.Context, plan shop.Plan) error {
	prod, err := rmqadmin.StartProducer(r.env.NameServers, r.want.Group+"-load")
	if err != nil {
		return err
	}
	defer func() { _ = prod.Shutdown() }()
	load := &Load{Rate: r.sc.Rate}
	loadDone := make(chan error, 1)
	go func() { loadDone <- load.Send(ctx, prod, plan.Messages) }()

	var faultErr error
	if err := sleep(ctx, r.sc.FaultAt); err == nil {
		r.say("sent %d, applying the fault", load.Sent())
		faults := &Faults{MariaDB: r.env.MariaDB, Broker: r.env.Broker, NameServers: r.env.NameServers,
			BrokerAddr: r.env.BrokerAddr, Consumers: r.consumers, Say: r.say}
		if faultErr = r.sc.Fault(ctx, faults); faultErr != nil {
			faultErr = fmt.Errorf("fault: %w", faultErr)
		}
	}
	loadErr := <-loadDone
	r.res.SendRetries = load.Retries()
	r.say("load done: %d messages sent, %d sends retried", load.Sent(), load.Retries())
	return errors.Join(faultErr, loadErr)
}

// drainAndVerify waits for the consumers to finish, lets stray redeliveries land, and compares MariaDB and
// the DLQ with the expectation.
func (r *runner) drainAndVerify(ctx context.Context) {
	check := &Checker{DB: r.db, NameServers: r.env.NameServers, Want: r.want}
	how := check.Drain(ctx, r.sampler, r.sc.Quiet, r.sc.Drain, func(n Counts) {
		r.say("draining: effects %d/%d, dedup rows %d, paused now %v", n.Orders, r.want.Events, n.Rows, r.sampler.Figures().PausedNow)
	})
	r.say("drain ended: %s", how)
	_ = sleep(ctx, 3*time.Second)
	counts, err := check.Count(ctx)
	r.res.Counts, r.res.Figures = counts, r.sampler.Figures()
	if err != nil {
		r.res.Problems = append(r.res.Problems, fmt.Sprintf("final count: %v", err))
		return
	}
	r.res.Problems = append(r.res.Problems, check.Problems(counts)...)
	for slot := range consumerCount {
		if err := r.consumers.Unexpected(slot); err != nil {
			r.res.Problems = append(r.res.Problems, err.Error())
		}
	}
}
