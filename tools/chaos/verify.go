package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/topics"
)

// Expectation is what a correct consumer group makes of a scenario's workload.
type Expectation struct {
	// RunID prefixes the run's event IDs and order numbers.
	RunID string
	// Group is the consumer group (unique to the run): its processed_event rows and %DLQ%<group> are the run's.
	Group string
	// Events is the number of distinct valid events: effects and dedup rows a correct consumer writes.
	Events int
	// PoisonEventID is the EVENT_ID of the one message that belongs in the DLQ.
	PoisonEventID string
	// Domain is the plan of an effects scenario (the domain workload, every order paid); nil for the
	// OrderCreated workload.
	Domain *shop.DomainPlan
}

// Counts is what MariaDB and the DLQ hold for a run.
type Counts struct {
	// Orders and Reservations are the business effects (shop.Effects) of the run's orders; in an effects
	// scenario Orders is the effects of every event type (shop.DomainEffects.Effects) summed.
	Orders, Reservations int
	// Domain and FollowUps are an effects scenario's shop rows and paid orders' follow-ups.
	Domain    shop.DomainEffects
	FollowUps FollowUps
	// Rows is the number of processed_event rows of the group.
	Rows int
	// Letters are the messages on %DLQ%<group>; nil when the DLQ was not read.
	Letters []Letter
}

// Letter is one message read from %DLQ%<group>.
type Letter struct {
	// EventID is its EVENT_ID property.
	EventID string
	// Reason is the reason the DLQ publisher attached (letter.PropReason), "" when the broker moved it there.
	Reason string
}

// Checker reads a run's outcome from MariaDB (through its own connection, never the consumers') and from
// the broker's DLQ.
type Checker struct {
	DB          *sqlx.DB
	NameServers []string
	Want        Expectation
	// receiver is an effects scenario's notification receiver.
	receiver *receiverProc
}

// Effects counts the run's orders, reservations and dedup rows. Errors (the database is down) are wrapped.
func (c *Checker) Effects(ctx context.Context) (Counts, error) {
	var n Counts
	var err error
	if c.Want.Domain == nil {
		n.Orders, n.Reservations, err = shop.Effects(ctx, c.DB, c.Want.RunID+"-o")
	} else {
		n.Domain, err = shop.RunEffects(ctx, c.DB, c.Want.RunID+"-")
		for _, e := range n.Domain.Effects() {
			n.Orders += e
		}
		n.Reservations = n.Domain.Reservations
	}
	if err != nil {
		return Counts{}, err
	}
	if err := c.DB.GetContext(ctx, &n.Rows, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ?`, c.Want.Group); err != nil {
		return Counts{}, fmt.Errorf("count processed_event rows of %s: %w", c.Want.Group, err)
	}
	if c.Want.Domain != nil {
		if n.FollowUps, err = c.followUps(ctx); err != nil {
			return Counts{}, err
		}
	}
	return n, nil
}

// Letters reads %DLQ%<group> (dlqtool.Read: the DLQ itself, not a metric), bounded by 30 s.
func (c *Checker) Letters(ctx context.Context) ([]Letter, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	msgs, err := dlqtool.Read(ctx, topics.Cluster{NameServers: c.NameServers}, c.Want.Group, 0)
	if err != nil {
		return nil, err
	}
	out := make([]Letter, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, Letter{EventID: m.GetProperty("EVENT_ID"), Reason: m.GetProperty(letter.PropReason)})
	}
	return out, nil
}

// Count returns the effects and the letters.
func (c *Checker) Count(ctx context.Context) (Counts, error) {
	counts, err := c.Effects(ctx)
	if err != nil {
		return counts, err
	}
	counts.Letters, err = c.Letters(ctx)
	return counts, err
}

// Drain waits until the run is complete (every effect and dedup row written, the poison message in the DLQ),
// or nothing has moved for quiet (no new effect, row or follow-up, no message handled by any consumer, no consumer
// paused), or timeout has passed; report is called with the effects about every 10 s. It returns how it
// ended: "complete", "quiet" or "timeout".
func (c *Checker) Drain(ctx context.Context, s *Sampler, quiet, timeout time.Duration, report func(Counts)) string {
	deadline := time.Now().Add(timeout)
	lastChange, lastReport := time.Now(), time.Now()
	var prev Counts
	for {
		counts, err := c.Effects(ctx)
		if err == nil && counts.progress() != prev.progress() {
			prev, lastChange = counts, time.Now()
		}
		if err == nil && c.effectsComplete(counts) {
			if letters, err := c.Letters(ctx); err == nil && hasLetter(letters, c.Want.PoisonEventID) {
				return "complete"
			}
		}
		f := s.Figures()
		idleSince := lastChange
		if f.LastProgress.After(idleSince) {
			idleSince = f.LastProgress
		}
		switch {
		case err == nil && !f.PausedNow && time.Since(idleSince) >= quiet:
			return "quiet"
		case time.Now().After(deadline):
			return "timeout"
		}
		if time.Since(lastReport) >= 10*time.Second {
			report(prev)
			lastReport = time.Now()
		}
		if sleep(ctx, time.Second) != nil {
			return "timeout"
		}
	}
}

// progress sums what grows while the run moves on: effects, dedup rows, sent outbox rows, credits and
// notifications received.
func (n Counts) progress() int {
	f := n.FollowUps
	return n.Orders + n.Rows + f.Rows[outboxsql.KindMessage][outboxsql.StatusSent] + f.Rows[outboxsql.KindEffect][outboxsql.StatusSent] +
		f.Credits + f.Received
}

func (c *Checker) effectsComplete(n Counts) bool {
	if d := c.Want.Domain; d != nil {
		for typ, want := range d.Events {
			if n.Domain.Effects()[typ] < want {
				return false
			}
		}
		return n.Rows >= c.Want.Events && c.followUpsComplete(n.FollowUps)
	}
	return n.Orders >= c.Want.Events && n.Reservations >= c.Want.Events && n.Rows >= c.Want.Events
}

// Problems lists every way counts differ from a correct outcome: effects = dedup rows = distinct events,
// and the DLQ holds the poison message alone; in an effects scenario also the stock and balances of the
// plan and the follow-ups (followUpProblems).
func (c *Checker) Problems(n Counts) []string {
	var p []string
	if c.Want.Domain != nil {
		p = append(p, c.domainProblems(n.Domain)...)
	} else if n.Orders != c.Want.Events || n.Reservations != c.Want.Events {
		p = append(p, fmt.Sprintf("effects: %d orders and %d reservations for %d events", n.Orders, n.Reservations, c.Want.Events))
	}
	if n.Rows != c.Want.Events {
		p = append(p, fmt.Sprintf("processed_event: %d rows of the group for %d events", n.Rows, c.Want.Events))
	}
	if len(n.Letters) != 1 || !hasLetter(n.Letters, c.Want.PoisonEventID) {
		p = append(p, describeLetters(n.Letters, c.Want.PoisonEventID))
	}
	if c.Want.Domain != nil {
		p = append(p, c.followUpProblems(n.FollowUps)...)
	}
	return p
}

// describeLetters says what the DLQ holds besides (or instead of) the poison message, with one example and
// its reason (cut at 200 characters), so the verdict stays one readable line.
func describeLetters(letters []Letter, poison string) string {
	var others []Letter
	for _, l := range letters {
		if l.EventID != poison {
			others = append(others, l)
		}
	}
	s := fmt.Sprintf("DLQ holds %d letters, want only the poison %s", len(letters), poison)
	if !hasLetter(letters, poison) {
		s += " (missing)"
	}
	if len(others) > 0 {
		reason := others[0].Reason
		if r := []rune(reason); len(r) > 200 {
			reason = string(r[:200]) + "…"
		}
		s += fmt.Sprintf("; %d others, e.g. %s: %q", len(others), others[0].EventID, reason)
	}
	return s
}

func hasLetter(letters []Letter, eventID string) bool {
	for _, l := range letters {
		if l.EventID == eventID {
			return true
		}
	}
	return false
}
