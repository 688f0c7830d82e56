package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/shop"
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
}

// Counts is what MariaDB and the DLQ hold for a run.
type Counts struct {
	// Orders and Reservations are the business effects (shop.Effects) of the run's orders.
	Orders, Reservations int
	// Rows is the number of processed_event rows of the group.
	Rows int
	// Letters are the messages on %DLQ%<group>; nil when the DLQ was not read.
	Letters []Letter
}

// Letter is one message read from %DLQ%<group>.
type Letter struct {
	// EventID is its EVENT_ID property.
	EventID string
	// Reason is the reason the DLQ publisher attached (dlq.PropReason), "" when the broker moved it there.
	Reason string
}

// Checker reads a run's outcome from MariaDB (through its own connection, never the consumers') and from
// the broker's DLQ.
type Checker struct {
	DB          *sqlx.DB
	NameServers []string
	Want        Expectation
}

// Effects counts the run's orders, reservations and dedup rows. Errors (the database is down) are wrapped.
func (c *Checker) Effects(ctx context.Context) (Counts, error) {
	orders, reservations, err := shop.Effects(ctx, c.DB, c.Want.RunID+"-o")
	if err != nil {
		return Counts{}, err
	}
	var rows int
	if err := c.DB.GetContext(ctx, &rows, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ?`, c.Want.Group); err != nil {
		return Counts{}, fmt.Errorf("count processed_event rows of %s: %w", c.Want.Group, err)
	}
	return Counts{Orders: orders, Reservations: reservations, Rows: rows}, nil
}

// Letters reads %DLQ%<group> (dlq.Read: the DLQ itself, not a metric), bounded by 30 s.
func (c *Checker) Letters(ctx context.Context) ([]Letter, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	msgs, err := dlq.Read(ctx, c.NameServers, c.Want.Group, 0)
	if err != nil {
		return nil, err
	}
	out := make([]Letter, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, Letter{EventID: m.GetProperty("EVENT_ID"), Reason: m.GetProperty(dlq.PropReason)})
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
// or nothing has moved for quiet (no new effect or row, no message handled by any consumer, no consumer
// paused), or timeout has passed; report is called with the effects about every 10 s. It returns how it
// ended: "complete", "quiet" or "timeout".
func (c *Checker) Drain(ctx context.Context, s *Sampler, quiet, timeout time.Duration, report func(Counts)) string {
	deadline := time.Now().Add(timeout)
	lastChange, lastReport := time.Now(), time.Now()
	var prev Counts
	for {
		counts, err := c.Effects(ctx)
		if err == nil && (counts.Orders != prev.Orders || counts.Rows != prev.Rows) {
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

func (c *Checker) effectsComplete(n Counts) bool {
	return n.Orders >= c.Want.Events && n.Reservations >= c.Want.Events && n.Rows >= c.Want.Events
}

// Problems lists every way counts differ from a correct outcome: effects = dedup rows = distinct events,
// and the DLQ holds the poison message alone.
func (c *Checker) Problems(n Counts) []string {
	var p []string
	if n.Orders != c.Want.Events || n.Reservations != c.Want.Events {
		p = append(p, fmt.Sprintf("effects: %d orders and %d reservations for %d events", n.Orders, n.Reservations, c.Want.Events))
	}
	if n.Rows != c.Want.Events {
		p = append(p, fmt.Sprintf("processed_event: %d rows of the group for %d events", n.Rows, c.Want.Events))
	}
	if len(n.Letters) != 1 || !hasLetter(n.Letters, c.Want.PoisonEventID) {
		p = append(p, describeLetters(n.Letters, c.Want.PoisonEventID))
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
