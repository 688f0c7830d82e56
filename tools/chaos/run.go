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

	"github.com/apache/rocketmq-client-go/v2/primitive"
	_ "github.com/go-sql-driver/mysql" // the MySQL driver for sqlx
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/rmq"
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
	// An effects scenario's loyalty topic, notification receiver and the gate in front of it.
	loyaltyTopic string
	receiver     *receiverProc
	gate         *Gate
}

func (r *runner) say(format string, args ...any) {
	_, _ = fmt.Fprintf(r.env.Out, "  [%s +%5.1fs] %s\n", r.sc.Name, time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

func (r *runner) run(ctx context.Context) error {
	if r.sc.NeedsBroker && r.env.Broker == nil {
		return errors.New("needs a broker instance of its own (make chaos starts one)")
	}
	msgs, faultAt, err := r.prepare(ctx)
	if err != nil {
		return err
	}
	defer r.db.Close()
	defer r.stopReceiver()
	if err := r.startConsumers(ctx); err != nil {
		return errors.Join(err, r.consumers.Stop())
	}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.sampler.Run(sampleCtx, 500*time.Millisecond) })
	defer func() { stopSampling(); wg.Wait() }()

	if err := r.loadWithFault(ctx, msgs, faultAt); err != nil {
		return errors.Join(err, r.consumers.Stop())
	}
	r.drainAndVerify(ctx)
	if err := r.consumers.Stop(); err != nil {
		r.res.Problems = append(r.res.Problems, err.Error())
	}
	return nil
}

// prepare plans the workload, migrates the schema once (two consumers migrating a fresh database at the
// same moment would race), seeds an effects scenario's stock and accounts, and creates the run's topic and
// the group's retry and DLQ topics. It returns the messages to send and when the fault starts: FaultAt,
// counted in an effects scenario from the first settling message (the OrderPaids that write outbox rows).
func (r *runner) prepare(ctx context.Context) ([]*primitive.Message, time.Duration, error) {
	id := strings.ReplaceAll(uuid.NewString(), "-", "")[:10]
	run := "chaos-" + r.sc.Name + "-" + id
	r.topic = "RMQGUARD_CHAOS_" + id
	group := "rmqguard-chaos-" + r.sc.Name + "-" + id
	r.want = Expectation{RunID: run, Group: group}
	var msgs []*primitive.Message
	faultAt := r.sc.FaultAt
	var plan shop.Plan
	var domain shop.DomainPlan
	var err error
	if r.sc.Effects {
		r.loyaltyTopic = r.topic + "_LOYALTY"
		if domain, err = effectsWorkload(run, r.topic, r.sc.Messages); err != nil {
			return nil, 0, err
		}
		msgs, r.want.Events, r.want.PoisonEventID, r.want.Domain = domain.Messages, domain.TotalEvents(), domain.PoisonEventID, &domain
		faultAt += time.Duration(float64(domain.SettleFrom) / r.sc.Rate * float64(time.Second))
	} else {
		plan, err = shop.Workload{RunID: run, Topic: r.topic, Messages: r.sc.Messages, DuplicateShare: 0.1,
			FailOnce: r.sc.Messages / 100, Poison: true}.Plan()
		if err != nil {
			return nil, 0, err
		}
		msgs, r.want.Events, r.want.PoisonEventID = plan.Messages, plan.Events, plan.PoisonEventID
	}
	r.res.Events = r.want.Events
	if r.db, err = sqlx.Open("mysql", r.env.DSN); err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", r.env.DSN, err)
	}
	if err := r.setUp(ctx, group, domain.Seed); err != nil {
		_ = r.db.Close()
		return nil, 0, err
	}
	if r.sc.Effects {
		r.say("run %s: %d messages (%d orders, all paid: %d events, %d re-sends, 1 poison) at %.0f/s to %s, group %s and %s-loyalty; fault %.0fs after the first",
			run, len(msgs), len(domain.Paid), domain.TotalEvents(), domain.Duplicates, r.sc.Rate, r.topic, group, group, faultAt.Seconds())
	} else {
		r.say("run %s: %d messages (%d events, %d re-sends, %d failing once, 1 poison) at %.0f/s to %s, group %s",
			run, len(msgs), plan.Events, plan.Duplicates, r.sc.Messages/100, r.sc.Rate, r.topic, group)
	}
	return msgs, faultAt, nil
}

// setUp migrates the shop's schema, applies seed (an effects scenario's; empty otherwise) and creates the
// run's topic and the group's retry and DLQ topics.
func (r *runner) setUp(ctx context.Context, group string, seed shop.Seed) error {
	if err := shop.Migrate(ctx, r.db.DB); err != nil {
		return err
	}
	if r.sc.Effects {
		s, err := shop.New()
		if err != nil {
			return err
		}
		if err := s.Apply(ctx, r.db, seed); err != nil {
			return err
		}
	}
	setup, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := rmq.EnsureTopic(setup, r.env.NameServers, r.env.BrokerAddr, r.topic, 4); err != nil {
		return err
	}
	return rmq.EnsureGroupTopics(setup, r.env.NameServers, r.env.BrokerAddr, group)
}

// startReceiver starts an effects scenario's notification receiver and the gate in front of it.
func (r *runner) startReceiver(ctx context.Context, logDir string) error {
	var err error
	if r.receiver, err = startReceiver(ctx, r.env.ConsumerBin, logDir); err != nil {
		return err
	}
	r.gate, err = OpenGate(r.receiver.addr)
	return err
}

// stopReceiver stops the gate and the receiver, if any.
func (r *runner) stopReceiver() {
	if r.gate != nil {
		r.gate.Close()
	}
	if r.receiver != nil {
		r.receiver.stop()
	}
}

// startConsumers starts the group's processes; their logs go to LogDir/<scenario>/.
func (r *runner) startConsumers(ctx context.Context) error {
	logDir := filepath.Join(r.env.LogDir, r.sc.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("log dir: %w", err)
	}
	args := ConsumerArgs{Bin: r.env.ConsumerBin, NameServers: strings.Join(r.env.NameServers, ","),
		Broker: r.env.BrokerAddr, DSN: r.env.DSN, Group: r.want.Group, Topic: r.topic, LogDir: logDir}
	if r.sc.Effects {
		if err := r.startReceiver(ctx, logDir); err != nil {
			return err
		}
		args.LoyaltyTopic, args.NotifyAddr = r.loyaltyTopic, r.gate.Addr()
	}
	r.consumers = NewConsumers(args, consumerCount)
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
func (r *runner) loadWithFault(ctx context.Context, msgs []*primitive.Message, faultAt time.Duration) error {
	prod, err := rmq.StartProducer(r.env.NameServers, r.want.Group+"-load")
	if err != nil {
		return err
	}
	defer func() { _ = prod.Shutdown() }()
	load := &Load{Rate: r.sc.Rate}
	loadDone := make(chan error, 1)
	go func() { loadDone <- load.Send(ctx, prod, msgs) }()

	var faultErr error
	if err := sleep(ctx, faultAt); err == nil {
		r.say("sent %d, applying the fault", load.Sent())
		faults := &Faults{MariaDB: r.env.MariaDB, Broker: r.env.Broker, NameServers: r.env.NameServers,
			BrokerAddr: r.env.BrokerAddr, Consumers: r.consumers, Gate: r.gate, Say: r.say,
			Pending: func(ctx context.Context) (int, int, error) { return pendingRows(ctx, r.db, r.want.Group) }}
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
	check := &Checker{DB: r.db, NameServers: r.env.NameServers, Want: r.want, receiver: r.receiver}
	how := check.Drain(ctx, r.sampler, r.sc.Quiet, r.sc.Drain, func(n Counts) {
		r.say("draining: effects %d/%d, dedup rows %d, paused now %v", n.Orders, r.want.Events, n.Rows, r.sampler.Figures().PausedNow)
		if f := n.FollowUps; r.sc.Effects {
			r.say("draining: outbox sent %d+%d of %d paid, loyalty %d, notified %d (%d calls)", f.Rows[outboxsql.KindMessage][outboxsql.StatusSent],
				f.Rows[outboxsql.KindEffect][outboxsql.StatusSent], len(r.want.Domain.Paid), f.Credits, f.Received, f.Calls)
		}
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
