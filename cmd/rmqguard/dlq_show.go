package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

func newDLQShowCmd(g *globalOptions) *cobra.Command {
	var (
		f       scanFlags
		db      dbFlags
		maxBody int
	)
	cmd := &cobra.Command{
		Use:   "show --group G ID",
		Short: "Show one letter of a group's DLQ: properties, reason, attempts, origin and body",
		Long: "Show the letters of %DLQ%<group>, read on every master broker, whose message ID (as `dlq list` prints\n" +
			"it), store ID (the broker's offset message ID), origin message ID (the ID the consumer logged) or event ID\n" +
			"is ID: each one's broker, metadata, properties sorted by name,\n" +
			"and its body — JSON pretty-printed, anything else as a hex dump with the printable text — cut at\n" +
			"--max-body bytes. A message dead-lettered twice shows both letters. Not found: exit 1 (and the scan's\n" +
			"problems when it was incomplete).\n\n" +
			"With the dedup database (--mysql-dsn, default $" + envMySQLDSN + ") it also shows the letter's replay from\n" +
			"the audit — when, by whom, sent, failed or uncertain; SUPERSEDED with the editor and the edited body\n" +
			"when `dlq edit` sent it edited — and whether the group processed its event. A database that cannot be\n" +
			"read: the letter is shown, the status as ?, exit 1.",
		Args: exactArgs(1, "one ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxBody < 0 {
				return usageError("--max-body %d: must be 0 or more", maxBody)
			}
			if err := db.validateDB(); err != nil {
				return err
			}
			res, err := f.scan(cmd, g, time.Now())
			if err != nil {
				return err
			}
			var found []dlqtool.Letter
			for _, l := range res.Letters {
				if letterHasID(l, args[0]) {
					found = append(found, l)
				}
			}
			if len(found) == 0 {
				_ = reportIncomplete(cmd.ErrOrStderr(), res)
				return failure(fmt.Errorf("no letter whose message ID, store ID, origin message ID or event ID is %s on %s (`rmqguard dlq list` lists them)", args[0], res.Topic))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			statuses, statusErr := db.letterStatuses(ctx, f.group, g.access.namespace, found)
			for i, l := range found {
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				printLetter(cmd.OutOrStdout(), l, maxBody)
				if statuses != nil || statusErr != nil {
					printReplay(cmd.OutOrStdout(), l, statuses, i, maxBody)
				}
			}
			if statusErr != nil {
				_ = reportIncomplete(cmd.ErrOrStderr(), res)
				return failure(fmt.Errorf("replay status not known (?): %w", statusErr))
			}
			return reportIncomplete(cmd.ErrOrStderr(), res)
		},
	}
	f.addScanFlags(cmd.Flags(), false)
	db.addDBFlags(cmd.Flags(), "holds the replay audit")
	cmd.Flags().IntVar(&maxBody, "max-body", 4096, "show at most N bytes of the body (of its pretty-printed text when it is JSON)")
	return cmd
}

// letterHasID reports whether id is l's DLQ message ID, store ID, origin message ID or event ID.
func letterHasID(l dlqtool.Letter, id string) bool {
	return id != "" && (l.MsgID == id || l.StoreID == id || l.OriginMsgID == id || l.EventID == id)
}

// printLetter writes l for a reader: metadata, sorted properties, body.
func printLetter(w io.Writer, l dlqtool.Letter, maxBody int) {
	field := func(name, value string) { fmt.Fprintf(w, "%-15s %s\n", name+":", dash(value)) }
	field("DLQ message ID", l.MsgID)
	field("store ID", l.StoreID)
	field("broker", l.Broker)
	field("location", fmt.Sprintf("%s queue %d offset %d", l.Topic, l.QueueID, l.QueueOffset))
	field("event ID", l.EventID)
	field("event type", l.EventType)
	field("origin", fmt.Sprintf("topic %s, message ID %s", dash(l.OriginTopic), dash(l.OriginMsgID)))
	field("reason", l.Reason)
	field("attempts", fmt.Sprint(l.Attempts))
	field("failed at", l.FailedAt.Format(time.RFC3339Nano))
	field("born at", l.BornAt.Format(time.RFC3339Nano))
	field("keys", l.Keys)
	field("tags", l.Tags)
	names := make([]string, 0, len(l.Properties))
	for k := range l.Properties {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "properties (%d):\n", len(names))
	for _, k := range names {
		fmt.Fprintf(w, "  %s = %s\n", k, l.Properties[k])
	}
	writeBody(w, l.Body, maxBody)
}

// printReplay writes what the audit and the dedup table say of the i-th letter (statuses nil: unknown):
// its last replay, and for one sent edited, SUPERSEDED, the editor and the edited body.
func printReplay(w io.Writer, l dlqtool.Letter, statuses []dlqtool.LetterStatus, i, maxBody int) {
	field := func(name, value string) { fmt.Fprintf(w, "%-15s %s\n", name+":", value) }
	if statuses == nil {
		field("replay", "?")
		return
	}
	st := statuses[i]
	rec := st.Replay
	switch {
	case rec == nil:
		field("replay", "- (never replayed)")
	case rec.Superseded():
		field("replay", fmt.Sprintf("SUPERSEDED: edited by %s at %s and replayed (run %s): %s", rec.EditedBy,
			rec.EditedAt.Format(time.RFC3339Nano), rec.ReplayID, auditOutcome(*rec)))
	default:
		field("replay", fmt.Sprintf("by %s at %s (run %s): %s", dash(rec.ReplayedBy), rec.ReplayedAt.Format(time.RFC3339Nano),
			rec.ReplayID, auditOutcome(*rec)))
	}
	if l.EventID != "" || rec != nil && rec.Status == dlqtool.AuditSent && rec.EventID != "" {
		field("processed", map[bool]string{true: "yes", false: "no"}[st.Processed])
	}
	if rec == nil || !rec.Superseded() {
		return
	}
	if !bytes.Equal(rec.OriginalBody, l.Body) {
		fmt.Fprintf(w, "original body recorded by the edit (%d bytes, differs from the letter's above):\n", len(rec.OriginalBody))
		writeBody(w, rec.OriginalBody, maxBody)
	}
	fmt.Fprint(w, "edited ")
	writeBody(w, rec.EditedBody, maxBody)
}

// auditOutcome says what became of a replay's send: sent as the message ID, failed with its error, or
// uncertain.
func auditOutcome(rec dlqtool.AuditRecord) string {
	switch rec.Status {
	case dlqtool.AuditSent:
		return "sent as " + rec.SentMsgID
	case dlqtool.AuditSending:
		return "uncertain: the send's result was not recorded"
	}
	return string(rec.Status) + ": " + rec.Error
}

// writeBody writes body: valid JSON pretty-printed, anything else as a hex dump with its printable text.
// Either form is cut after maxBody bytes (of the pretty text, or of the body), followed by "(N more bytes)".
func writeBody(w io.Writer, body []byte, maxBody int) {
	var pretty bytes.Buffer
	if len(body) > 0 && json.Indent(&pretty, bytes.TrimSpace(body), "", "  ") == nil {
		text, rest := cut(pretty.Bytes(), maxBody)
		fmt.Fprintf(w, "body (%d bytes, JSON):\n", len(body))
		writeIndented(w, string(text))
		if rest > 0 {
			fmt.Fprintf(w, "  (%d more bytes)\n", rest)
		}
		return
	}
	shown, rest := cut(body, maxBody)
	fmt.Fprintf(w, "body (%d bytes, not JSON: hex and printable text):\n", len(body))
	writeIndented(w, hex.Dump(shown))
	if rest > 0 {
		fmt.Fprintf(w, "  (%d more bytes)\n", rest)
	}
}

// cut returns the first max bytes of b and how many bytes were left out.
func cut(b []byte, max int) ([]byte, int) {
	if len(b) <= max {
		return b, 0
	}
	return b[:max], len(b) - max
}

// writeIndented writes text with every line indented by two spaces, ending with a line break.
func writeIndented(w io.Writer, text string) {
	text = strings.TrimSuffix(text, "\n")
	if text == "" {
		return
	}
	for _, line := range strings.Split(text, "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
}
