package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// listRow is one letter as `dlq list` shows it (also its JSON form with -o json).
type listRow struct {
	MsgID       string    `json:"msg_id"`
	StoreID     string    `json:"store_id"`
	Broker      string    `json:"broker"`
	EventID     string    `json:"event_id"`
	OriginTopic string    `json:"origin_topic"`
	EventType   string    `json:"event_type"`
	Reason      string    `json:"reason"`
	Attempts    int       `json:"attempts"`
	FailedAt    time.Time `json:"failed_at"`
	// ReplayStatus is "not-replayed", the audit's "sent", "failed" or "sending" (a replay that did not
	// record its send: uncertain), "superseded" (sent edited: `dlq edit`; EditedCopy is that send's audit
	// status), or "unknown" without a database.
	ReplayStatus string     `json:"replay_status"`
	EditedCopy   string     `json:"edited_copy,omitempty"`
	ReplayID     string     `json:"replay_id,omitempty"`
	ReplayedAt   *time.Time `json:"replayed_at,omitempty"`
	ReplayedBy   string     `json:"replayed_by,omitempty"`
	// Processed says whether the dedup scope has processed the letter's event (since the replay, for a
	// replayed one: the event ID the replay sent, too); null without a database or an event ID.
	Processed *bool `json:"processed"`
}

// Replay statuses of a listRow besides the audit's.
const (
	replayNone       = "not-replayed"
	replayUnknown    = "unknown"
	replaySuperseded = "superseded"
)

func newDLQListCmd(g *globalOptions) *cobra.Command {
	var (
		f      scanFlags
		db     dbFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "list --group G [--since T --until T --event-type X --reason TEXT --key K] [--limit N] [-o table|json]",
		Short: "List the letters of a group's DLQ on every master broker, one line each, with their replay status",
		Long: "List the letters on %DLQ%<group> of every master broker: DLQ message ID, broker, event ID, original\n" +
			"topic, event type, reason (cut at 60 characters: `dlq show` and -o json give it whole), attempts (ReconsumeTimes when dead-lettered), failed-at, and the replay status\n" +
			"read from the dedup database (--mysql-dsn, default $" + envMySQLDSN + "): REPLAYED when and by whom the\n" +
			"last replay sent it (\"-\" never; \"failed …\", \"uncertain …\" when a replay did not send it or did not\n" +
			"record the send; \"SUPERSEDED edited …\" when `dlq edit` sent it with an edited body, never to be replayed\n" +
			"as it is), PROCESSED whether the group's dedup scope has processed its event (since). Without a\n" +
			"database, or one that cannot be read (then exit 1), the status shows \"?\". Each queue is read from its\n" +
			"oldest letter to its end when the scan starts. An incomplete scan (a queue not readable, a pull error, the\n" +
			"timeout, --limit reached with letters left) prints what it read, its problems on stderr, and exits 1.\n" +
			"A DLQ that does not exist has no letters (exit 0); a write-only one (perm 2) is an error unless --fix-perm.",
		Args: exactArgs(0, "no argument"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageError("-o %q: want table or json", output)
			}
			if err := db.validateDB(); err != nil {
				return err
			}
			res, err := f.scan(cmd, g, time.Now())
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			// A status that cannot be read leaves the letters listed, with "?", and exits 1.
			statuses, statusErr := db.letterStatuses(ctx, f.group, g.access.namespace, res.Letters)
			if db.dsn == "" && len(res.Letters) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "replay status not known (?): pass --mysql-dsn or set %s (the dedup database, which holds the replay audit)\n", envMySQLDSN)
			}
			if err := printList(cmd.OutOrStdout(), output, listRows(res.Letters, statuses)); err != nil {
				return failure(err)
			}
			if statusErr != nil {
				_ = reportIncomplete(cmd.ErrOrStderr(), res)
				return failure(fmt.Errorf("replay status not known (?): %w", statusErr))
			}
			return reportIncomplete(cmd.ErrOrStderr(), res)
		},
	}
	f.addScanFlags(cmd.Flags(), true)
	db.addDBFlags(cmd.Flags(), "holds the replay audit")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json (an array of rows)")
	return cmd
}

// listRows builds the rows of letters with their statuses (nil: unknown).
func listRows(letters []dlqtool.Letter, statuses []dlqtool.LetterStatus) []listRow {
	rows := make([]listRow, 0, len(letters))
	for i, l := range letters {
		r := listRow{MsgID: l.MsgID, StoreID: l.StoreID, Broker: l.Broker, EventID: l.EventID, OriginTopic: l.OriginTopic,
			EventType: l.EventType, Reason: l.Reason, Attempts: l.Attempts, FailedAt: l.FailedAt, ReplayStatus: replayUnknown}
		if statuses != nil {
			st := statuses[i]
			r.ReplayStatus = replayNone
			if rep := st.Replay; rep != nil {
				at := rep.ReplayedAt
				r.ReplayStatus, r.ReplayID, r.ReplayedAt, r.ReplayedBy = string(rep.Status), rep.ReplayID, &at, rep.ReplayedBy
				if rep.Superseded() {
					r.ReplayStatus, r.EditedCopy = replaySuperseded, string(rep.Status)
				}
			}
			if rep := st.Replay; l.EventID != "" || rep != nil && rep.Status == dlqtool.AuditSent && rep.EventID != "" {
				processed := st.Processed
				r.Processed = &processed
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// printList writes the rows as a table or a JSON array.
func printList(w io.Writer, format string, rows []listRow) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DLQ MSG ID\tBROKER\tEVENT ID\tORIGIN TOPIC\tEVENT TYPE\tREASON\tATTEMPTS\tFAILED AT\tREPLAYED\tPROCESSED")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.MsgID, dash(r.Broker), dash(r.EventID), dash(r.OriginTopic),
			dash(r.EventType), dash(shorten(oneLine(r.Reason), reasonWidth)), r.Attempts, r.FailedAt.Format(time.RFC3339), replayedCell(r), processedCell(r))
	}
	return tw.Flush()
}

// replayedCell is the REPLAYED column: "-" never replayed, "<time> by <operator>" sent, "failed …" or
// "uncertain …" for a replay that did not send it or did not record the send, "SUPERSEDED …" sent edited
// (and what became of that send unless it was sent), "?" unknown.
func replayedCell(r listRow) string {
	switch r.ReplayStatus {
	case replayUnknown:
		return "?"
	case replayNone:
		return "-"
	}
	when := r.ReplayedAt.UTC().Format(time.RFC3339) + " by " + dash(r.ReplayedBy)
	if r.ReplayStatus == replaySuperseded {
		switch dlqtool.AuditStatus(r.EditedCopy) {
		case dlqtool.AuditSent:
			return "SUPERSEDED edited " + when
		case dlqtool.AuditSending:
			return "SUPERSEDED edited " + when + ", send uncertain"
		}
		return "SUPERSEDED edited " + when + ", send " + r.EditedCopy
	}
	switch dlqtool.AuditStatus(r.ReplayStatus) {
	case dlqtool.AuditSent:
		return when
	case dlqtool.AuditSending:
		return "uncertain " + when
	}
	return r.ReplayStatus + " " + when
}

// processedCell is the PROCESSED column: yes, no, "-" for a letter without event ID, "?" unknown.
func processedCell(r listRow) string {
	switch {
	case r.ReplayStatus == replayUnknown:
		return "?"
	case r.Processed == nil:
		return "-"
	case *r.Processed:
		return "yes"
	}
	return "no"
}

// dash shows an empty value as "-" so table columns stay aligned.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// reasonWidth is the most runes of a reason the table shows; `dlq show` and -o json give it whole.
const reasonWidth = 60

// shorten returns s, or its first n-1 runes and "…" when it has more than n.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// oneLine replaces tabs and line breaks, which would break the table, by spaces.
func oneLine(s string) string {
	out := []rune(s)
	for i, r := range out {
		if r == '\t' || r == '\n' || r == '\r' {
			out[i] = ' '
		}
	}
	return string(out)
}
