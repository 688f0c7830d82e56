package chaos

import (
	"fmt"
	"strings"
	"time"

	"github.com/rmqguard/rmqguard/internal/outboxsql"
)

// Result is the outcome of one scenario.
type Result struct {
	// Scenario is the scenario's name.
	Scenario string
	// Events is the number of distinct valid events sent.
	Events int
	// Counts is what MariaDB and the DLQ held at the end.
	Counts Counts
	// Figures are the consumers' metrics (duplicates, pause).
	Figures Figures
	// SendRetries is how many sends failed and were tried again (the broker was away).
	SendRetries int
	// Elapsed is the time from the scenario's start (topic set-up and consumer start, a second or two, then
	// the first send) to the verdict.
	Elapsed time.Duration
	// Problems lists what went wrong; none means the scenario passed.
	Problems []string
}

// OK reports whether the scenario passed.
func (r Result) OK() bool { return len(r.Problems) == 0 }

// Line is the scenario's verdict in one line:
//
//	chaos: ok scenario=NAME events=N effects=N dlq=1 paused=61.2s duplicates=N elapsed=95.0s
//	chaos: FAILED scenario=NAME events=N effects=N dlq=K paused=0.0s duplicates=N elapsed=95.0s: problem; problem
//
// An effects scenario adds its follow-ups after duplicates: outbox=S/N (rows sent of the run's outbox
// rows, messages and effects), loyalty=N (credits applied by the group <group>-loyalty), notified=R/K (keys
// the receiver got at least once of the notification keys), calls=N (the receiver's calls for them).
//
// paused is how long consumption paused (the consumers' rmqguard_consumption_paused_seconds_total); 0.0s
// when no consumer ever paused (the counter has no series for the group until a pause ends).
func (r Result) Line() string {
	paused := fmt.Sprintf("%.1fs", r.Figures.Paused.Seconds())
	fields := fmt.Sprintf("scenario=%s events=%d effects=%d dlq=%d paused=%s duplicates=%.0f elapsed=%.1fs",
		r.Scenario, r.Events, r.Counts.Orders, len(r.Counts.Letters), paused, r.Figures.Duplicates, r.Elapsed.Seconds())
	if f := r.Counts.FollowUps; f.Rows != nil {
		sent := f.Rows[outboxsql.KindMessage][outboxsql.StatusSent] + f.Rows[outboxsql.KindEffect][outboxsql.StatusSent]
		fields = strings.Replace(fields, " elapsed=", fmt.Sprintf(" outbox=%d/%d loyalty=%d notified=%d/%d calls=%d elapsed=",
			sent, f.total(outboxsql.KindMessage)+f.total(outboxsql.KindEffect), f.Credits, f.Received, f.Keys, f.Calls), 1)
	}
	if r.OK() {
		return "chaos: ok " + fields
	}
	return "chaos: FAILED " + fields + ": " + strings.Join(r.Problems, "; ")
}
