package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rmqguard/rmqguard/internal/rmqadmin"
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
	// Say prints one progress line.
	Say func(format string, args ...any)
}

// Durations of the faults, from the issue: read-only for 20 s, stopped for 60 s.
type Durations struct {
	// ReadOnly is how long MariaDB stays read-only (SET GLOBAL read_only=1).
	ReadOnly time.Duration
	// Stopped is how long MariaDB stays stopped.
	Stopped time.Duration
	// ConsumerDown is how long the killed consumer stays down before it is started again.
	ConsumerDown time.Duration
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
// read-only for 20 s or stopped for 60 s, a killed consumer down for 5 s; the drain ends after 3 min, or after
// 45 s without progress.
func Full() Profile {
	return Profile{Messages: 2000, Rate: 50, FaultAt: 10 * time.Second, Drain: 3 * time.Minute, Quiet: 45 * time.Second,
		Durations: Durations{ReadOnly: 20 * time.Second, Stopped: 60 * time.Second, ConsumerDown: 5 * time.Second}}
}

// Short is the profile of the chaos test inside `make test`: 600 messages at 60/s (10 s of load), the fault
// after 3 s, MariaDB read-only for 6 s or stopped for 10 s; the drain ends after 90 s, or after 45 s without
// progress.
func Short() Profile {
	return Profile{Messages: 600, Rate: 60, FaultAt: 3 * time.Second, Drain: 90 * time.Second, Quiet: 45 * time.Second,
		Durations: Durations{ReadOnly: 6 * time.Second, Stopped: 10 * time.Second, ConsumerDown: 3 * time.Second}}
}

// Scenarios returns the five scenarios of the issue, in the order `make chaos` runs them, sized by p.
func Scenarios(p Profile) []Scenario {
	mk := func(name string, fault func(context.Context, *Faults) error) Scenario {
		return Scenario{Name: name, Messages: p.Messages, Rate: p.Rate, FaultAt: p.FaultAt, Drain: p.Drain,
			Quiet: p.Quiet, Fault: fault}
	}
	broker := mk("broker-restart", restartBroker)
	broker.NeedsBroker = true
	return []Scenario{
		mk("mariadb-restart", restartMariaDB),
		broker,
		mk("consumer-kill", killConsumer(p.ConsumerDown)),
		mk("mariadb-readonly", readOnlyMariaDB(p.ReadOnly)),
		mk("mariadb-stop", stopMariaDB(p.Stopped)),
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
	err := rmqadmin.WaitBrokerRegistered(regCtx, f.NameServers, f.BrokerAddr)
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
