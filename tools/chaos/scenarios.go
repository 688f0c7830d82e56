package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// Scenario is one fault applied to a consumer group of two example consumers while a workload arrives.
type Scenario struct {
	// Name is how the scenario is reported and selected (e.g. "mariadb-stop").
	Name string
	// Messages is the number of OrderCreated messages sent, re-sends included, the poison message excluded.
	// A tenth are re-sends of earlier events as new messages; Messages/100 events fail their first attempt.
	Messages int
	// Rate is messages per second; Messages/Rate is how long sending lasts.
	Rate float64
	// FaultAt is when the fault starts, counted from the first send: mid-run.
	FaultAt time.Duration
	// Fault applies the fault and undoes it (restarts what it stopped, makes writable what it made
	// read-only) before it returns, even when ctx ends early.
	Fault func(ctx context.Context, f *Faults) error
	// NeedsBroker is true when Fault restarts the broker: the scenario needs a broker of its own.
	NeedsBroker bool
	// Effects selects the domain workload with every order paid: each OrderPaid writes outbox rows (a
	// LoyaltyPointsCredited message to the group <group>-loyalty, a notification effect to a receiver
	// behind a Gate), and the verdict checks them too. FaultAt then counts from the first OrderPaid's part
	// of the workload (its settling messages), when outbox rows are being written.
	Effects bool
	// Drain bounds the wait for the consumers to finish after the fault and the load are over.
	Drain time.Duration
	// Quiet ends the wait early when nothing has moved for that long (no effect, no message handled, no
	// consumer paused): the consumers have given up on what is missing. It must exceed 30 s: a queue whose
	// pull found the push consumer suspended sleeps 30 s (the client's _PullDelayTimeWhenSuspend) before it
	// looks again, so consumption resumes up to 30 s after Resume; a restarted broker takes as long.
	Quiet time.Duration
}

// Faults is what a fault acts on; it reports each step through Say.
type Faults struct {
	// MariaDB is the consumers' dedicated database server.
	MariaDB *MariaDB
	// Broker is the dedicated broker; nil on a shared broker.
	Broker *Broker
	// NameServers are the broker's name servers, asked whether a restarted broker has registered.
	NameServers []string
	// BrokerAddr is the broker's address as it registers.
	BrokerAddr string
	// Consumers are the group's processes.
	Consumers *Consumers
	// Gate stands between the consumers and the notification receiver; nil unless Scenario.Effects.
	Gate *Gate
	// Pending counts the run's outbox rows not yet sent (messages, effects).
	Pending func(ctx context.Context) (messages, effects int, err error)
	// Say prints one progress line.
	Say func(format string, args ...any)
}

// Durations of the faults: read-only for 20 s, stopped for 60 s.
type Durations struct {
	// ReadOnly is how long MariaDB stays read-only (SET GLOBAL read_only=1).
	ReadOnly time.Duration
	// Stopped is how long MariaDB stays stopped.
	Stopped time.Duration
	// ConsumerDown is how long the killed consumer stays down before it is started again.
	ConsumerDown time.Duration
	// BrokerDown is how long the broker stays stopped while the relay has rows.
	BrokerDown time.Duration
	// ReceiverDown is how long the notification receiver refuses connections.
	ReceiverDown time.Duration
}

// Profile sizes a set of scenarios.
type Profile struct {
	// Messages is Scenario.Messages.
	Messages int
	// Rate is Scenario.Rate, messages per second.
	Rate float64
	// FaultAt is Scenario.FaultAt.
	FaultAt time.Duration
	// Drain is Scenario.Drain.
	Drain time.Duration
	// Quiet is Scenario.Quiet.
	Quiet time.Duration
	// Durations are the faults' durations.
	Durations
}

// Full is the profile of `make chaos`: 2,000 messages at 50/s (40 s of load), the fault after 10 s, MariaDB
// read-only for 20 s or stopped for 60 s, a killed consumer down for 5 s, the broker stopped for 30 s, the
// notification receiver down for 20 s; the drain ends after 3 min, or after 45 s without progress.
func Full() Profile {
	return Profile{Messages: 2000, Rate: 50, FaultAt: 10 * time.Second, Drain: 3 * time.Minute, Quiet: 45 * time.Second,
		Durations: Durations{ReadOnly: 20 * time.Second, Stopped: 60 * time.Second, ConsumerDown: 5 * time.Second,
			BrokerDown: 30 * time.Second, ReceiverDown: 20 * time.Second}}
}

// Short is the profile of the chaos test inside `make test`: 600 messages at 60/s (10 s of load), the fault
// after 3 s, MariaDB read-only for 6 s or stopped for 10 s, the broker stopped for 10 s, the receiver down
// for 6 s; the drain ends after 90 s, or after 45 s without progress.
func Short() Profile {
	return Profile{Messages: 600, Rate: 60, FaultAt: 3 * time.Second, Drain: 90 * time.Second, Quiet: 45 * time.Second,
		Durations: Durations{ReadOnly: 6 * time.Second, Stopped: 10 * time.Second, ConsumerDown: 3 * time.Second,
			BrokerDown: 10 * time.Second, ReceiverDown: 6 * time.Second}}
}

// Scenarios returns the scenarios in the order `make chaos` runs them, sized by p: five on the OrderCreated
// workload, then three with outbox rows and effects in flight (Scenario.Effects).
func Scenarios(p Profile) []Scenario {
	mk := func(name string, fault func(context.Context, *Faults) error) Scenario {
		return Scenario{Name: name, Messages: p.Messages, Rate: p.Rate, FaultAt: p.FaultAt, Drain: p.Drain,
			Quiet: p.Quiet, Fault: fault}
	}
	broker := mk("broker-restart", restartBroker)
	broker.NeedsBroker = true
	effects := func(name string, fault func(context.Context, *Faults) error) Scenario {
		s := mk(name, fault)
		s.Effects = true
		return s
	}
	brokerStop := effects("effects-broker-stop", stopBrokerWithRows(p.BrokerDown))
	brokerStop.NeedsBroker = true
	return []Scenario{
		mk("mariadb-restart", restartMariaDB),
		broker,
		mk("consumer-kill", killConsumer(p.ConsumerDown)),
		mk("mariadb-readonly", readOnlyMariaDB(p.ReadOnly)),
		mk("mariadb-stop", stopMariaDB(p.Stopped)),
		effects("effects-consumer-kill", killConsumerWithEffects(p.ConsumerDown)),
		brokerStop,
		effects("effects-receiver-down", receiverDown(p.ReceiverDown)),
	}
}

// Select returns the scenarios named in names (comma-separated; "all" or "" for every one), in the order
// of all. Errors: an unknown name, listing the known ones.
func Select(all []Scenario, names string) ([]Scenario, error) {
	if names == "" || names == "all" {
		return all, nil
	}
	byName := map[string]Scenario{}
	var known []string
	for _, s := range all {
		byName[s.Name] = s
		known = append(known, s.Name)
	}
	var out []Scenario
	for _, n := range strings.Split(names, ",") {
		s, ok := byName[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("scenario %q: unknown; known: %s", n, strings.Join(known, ", "))
		}
		out = append(out, s)
	}
	return out, nil
}

// restartMariaDB stops the server (SIGTERM) and starts it again at once.
func restartMariaDB(ctx context.Context, f *Faults) error {
	f.Say("fault: stopping MariaDB")
	stopErr := f.MariaDB.Stop(ctx)
	start := time.Now()
	err := f.MariaDB.Restart(context.WithoutCancel(ctx))
	f.Say("fault: MariaDB restarted (%.1fs to answer)", time.Since(start).Seconds())
	return errors.Join(stopErr, err)
}

// restartBroker stops the broker gracefully, starts it again and waits until the name server lists it.
func restartBroker(ctx context.Context, f *Faults) error {
	if f.Broker == nil {
		return errors.New("broker-restart needs a broker instance of its own (deploy/local/broker-instance.sh)")
	}
	f.Say("fault: restarting the broker")
	start := time.Now()
	if err := f.Broker.RestartBroker(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	regCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err := rmq.WaitBrokerRegistered(regCtx, f.NameServers, f.BrokerAddr)
	f.Say("fault: broker back and registered (%.1fs)", time.Since(start).Seconds())
	return err
}

// killConsumer kill -9s consumer 0 and starts it again after down.
func killConsumer(down time.Duration) func(context.Context, *Faults) error {
	return func(ctx context.Context, f *Faults) error {
		f.Say("fault: kill -9 consumer 0")
		if err := f.Consumers.Kill(0); err != nil {
			return err
		}
		_ = sleep(ctx, down)
		err := f.Consumers.Start(context.WithoutCancel(ctx), 0)
		f.Say("fault: consumer 0 started again after %s", down)
		return err
	}
}

// readOnlyMariaDB makes the server read-only (the failover stand-in: writes fail with 1290/1836) for d.
func readOnlyMariaDB(d time.Duration) func(context.Context, *Faults) error {
	return func(ctx context.Context, f *Faults) error {
		f.Say("fault: SET GLOBAL read_only=1 for %s", d)
		if err := f.MariaDB.SQL(ctx, "SET GLOBAL read_only=1"); err != nil {
			return err
		}
		_ = sleep(ctx, d)
		err := f.MariaDB.SQL(context.WithoutCancel(ctx), "SET GLOBAL read_only=0")
		f.Say("fault: SET GLOBAL read_only=0")
		return err
	}
}

// stopMariaDB stops the server for d, then starts it again.
func stopMariaDB(d time.Duration) func(context.Context, *Faults) error {
	return func(ctx context.Context, f *Faults) error {
		f.Say("fault: stopping MariaDB for %s", d)
		start := time.Now()
		stopErr := f.MariaDB.Stop(ctx)
		_ = sleep(ctx, d-time.Since(start))
		err := f.MariaDB.Restart(context.WithoutCancel(ctx))
		f.Say("fault: MariaDB started again (down %.1fs)", time.Since(start).Seconds())
		return errors.Join(stopErr, err)
	}
}

// slowReceiver is how long the gate holds each request to the receiver while rows are made to queue up in
// the relay (it runs a round's rows one after the other): about 10 calls a second against some 20 paid
// orders a second.
const slowReceiver = 100 * time.Millisecond

// sayPending reports the run's outbox rows not yet sent, prefixed by what.
func sayPending(ctx context.Context, f *Faults, what string) {
	m, e, err := f.Pending(ctx)
	if err != nil {
		f.Say("fault: %s: %v", what, err)
		return
	}
	f.Say("fault: %s: %d LoyaltyPointsCredited messages and %d notification effects pending in the outbox", what, m, e)
}

// killConsumerWithEffects makes the receiver slow (each call held 3 s) so that notifications are in flight
// and rows wait in the relay, kill -9s consumer 0 after 3 s, starts it again after down, and lifts the delay.
func killConsumerWithEffects(down time.Duration) func(context.Context, *Faults) error {
	return func(ctx context.Context, f *Faults) error {
		f.Say("fault: notification receiver slow (3 s a call) so that effects are in flight")
		f.Gate.SetDelay(3 * time.Second)
		defer f.Gate.SetDelay(0)
		_ = sleep(ctx, 3*time.Second)
		sayPending(ctx, f, "before kill -9 consumer 0")
		if err := f.Consumers.Kill(0); err != nil {
			return err
		}
		_ = sleep(ctx, down)
		err := f.Consumers.Start(context.WithoutCancel(ctx), 0)
		f.Gate.SetDelay(0)
		f.Say("fault: consumer 0 started again after %s; receiver fast again", down)
		return err
	}
}

// stopBrokerWithRows makes rows queue up in the relay (the receiver slowed to slowReceiver a call for 3 s),
// freezes the consumers (SIGSTOP) so that the relay keeps them while the broker shuts down, stops the
// broker, thaws the consumers, and keeps the broker stopped for d from then — the relay's sends fail, its
// rows wait — then starts it again and waits until the name server lists it. It reports the pending rows at the
// stop and the most seen during the outage.
func stopBrokerWithRows(d time.Duration) func(context.Context, *Faults) error {
	return func(ctx context.Context, f *Faults) error {
		if f.Broker == nil {
			return errors.New("effects-broker-stop needs a broker instance of its own (deploy/local/broker-instance.sh)")
		}
		f.Gate.SetDelay(slowReceiver)
		_ = sleep(ctx, 3*time.Second)
		if err := f.Consumers.Freeze(); err != nil {
			return errors.Join(err, f.Consumers.Thaw())
		}
		sayPending(ctx, f, "consumers frozen, stopping the broker for "+d.String())
		start := time.Now()
		stopErr := f.Broker.StopBroker(ctx)
		stopErr = errors.Join(stopErr, f.Consumers.Thaw())
		f.Gate.SetDelay(0)
		f.Say("fault: broker stopped (%.1fs to shut down), consumers thawed", time.Since(start).Seconds())
		gone := time.Now()
		maxM, maxE := 0, 0
		for time.Since(gone) < d && ctx.Err() == nil {
			if m, e, err := f.Pending(ctx); err == nil {
				maxM, maxE = max(maxM, m), max(maxE, e)
			}
			_ = sleep(ctx, time.Second)
		}
		f.Say("fault: during the outage at most %d messages and %d effects were pending; starting the broker", maxM, maxE)
		if err := f.Broker.StartBroker(context.WithoutCancel(ctx)); err != nil {
			return errors.Join(stopErr, err)
		}
		regCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		err := rmq.WaitBrokerRegistered(regCtx, f.NameServers, f.BrokerAddr)
		f.Say("fault: broker back and registered (%.1fs after it had stopped)", time.Since(gone).Seconds())
		return errors.Join(stopErr, err)
	}
}

// receiverDown refuses the consumers' connections to the notification receiver for d (the gate closed;
// the receiver keeps its counts) and reports the effects pending at the end.
func receiverDown(d time.Duration) func(context.Context, *Faults) error {
	return func(ctx context.Context, f *Faults) error {
		f.Say("fault: notification receiver down (connections refused) for %s", d)
		f.Gate.Down()
		_ = sleep(ctx, d)
		sayPending(ctx, f, "receiver coming back")
		err := f.Gate.Up(context.WithoutCancel(ctx))
		f.Say("fault: notification receiver up again")
		return err
	}
}
