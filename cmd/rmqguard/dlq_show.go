package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/spf13/cobra"
)

func newDLQShowCmd(g *globalOptions) *cobra.Command {
	var (
		f       scanFlags
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
			"problems when it was incomplete).",
		Args: exactArgs(1, "one ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if maxBody < 0 {
				return usageError("--max-body %d: must be 0 or more", maxBody)
			}
			res, err := f.scan(cmd, g, time.Now())
			if err != nil {
				return err
			}
			found := 0
			for _, l := range res.Letters {
				if letterHasID(l, args[0]) {
					if found > 0 {
						fmt.Fprintln(cmd.OutOrStdout())
					}
					found++
					printLetter(cmd.OutOrStdout(), l, maxBody)
				}
			}
			if found == 0 {
				_ = reportIncomplete(cmd.ErrOrStderr(), res)
				return failure(fmt.Errorf("no letter whose message ID, store ID, origin message ID or event ID is %s on %s (`rmqguard dlq list` lists them)", args[0], res.Topic))
			}
			return reportIncomplete(cmd.ErrOrStderr(), res)
		},
	}
	f.addScanFlags(cmd.Flags(), false)
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
