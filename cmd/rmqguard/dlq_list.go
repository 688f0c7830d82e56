package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rmqguard/rmqguard/dlq"
)

// listRow is one letter as `dlq list` shows it (also its JSON form with -o json).
type listRow struct {
	MsgID       string    `json:"msg_id"`
	EventID     string    `json:"event_id"`
	OriginTopic string    `json:"origin_topic"`
	EventType   string    `json:"event_type"`
	Reason      string    `json:"reason"`
	Attempts    int       `json:"attempts"`
	FailedAt    time.Time `json:"failed_at"`
}

func newDLQListCmd(g *globalOptions) *cobra.Command {
	var (
		f      scanFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "list --group G [--since T --until T --event-type X --reason TEXT --key K] [--limit N] [-o table|json]",
		Short: "List the letters of a group's DLQ, one line each",
		Long: "List the letters on %DLQ%<group>: DLQ message ID, event ID, original topic, event type, reason,\n" +
			"attempts (ReconsumeTimes when dead-lettered) and failed-at. Each queue is read from its oldest letter\n" +
			"to its end when the scan starts. An incomplete scan (a queue not readable, a pull error, the timeout,\n" +
			"--limit reached with letters left) prints what it read, its problems on stderr, and exits 1.\n" +
			"A DLQ that does not exist has no letters (exit 0); a write-only one (perm 2) is an error unless --fix-perm.",
		Args: exactArgs(0, "no argument"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageError("-o %q: want table or json", output)
			}
			res, err := f.scan(cmd, g, time.Now())
			if err != nil {
				return err
			}
			if err := printList(cmd.OutOrStdout(), output, res.Letters); err != nil {
				return failure(err)
			}
			return reportIncomplete(cmd.ErrOrStderr(), res)
		},
	}
	f.addScanFlags(cmd.Flags(), true)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json (an array of rows)")
	return cmd
}

// printList writes the letters as a table or a JSON array.
func printList(w io.Writer, format string, letters []dlq.Letter) error {
	rows := make([]listRow, 0, len(letters))
	for _, l := range letters {
		rows = append(rows, listRow{MsgID: l.MsgID, EventID: l.EventID, OriginTopic: l.OriginTopic, EventType: l.EventType,
			Reason: l.Reason, Attempts: l.Attempts, FailedAt: l.FailedAt})
	}
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DLQ MSG ID\tEVENT ID\tORIGIN TOPIC\tEVENT TYPE\tREASON\tATTEMPTS\tFAILED AT")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.MsgID, dash(r.EventID), dash(r.OriginTopic), dash(r.EventType),
			dash(oneLine(r.Reason)), r.Attempts, r.FailedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

// dash shows an empty value as "-" so table columns stay aligned.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
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
