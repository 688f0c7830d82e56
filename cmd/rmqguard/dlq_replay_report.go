package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/schollz/progressbar/v3"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// newProgress returns a progress bar of total letters on w when w is a terminal, else nil.
func newProgress(w io.Writer, total int, dryRun bool) *progressbar.ProgressBar {
	if !isTerminal(w) {
		return nil
	}
	desc := "replaying"
	if dryRun {
		desc = "deciding"
	}
	return progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
}

// printReport prints one line per letter not sent or sent with a remark (every letter with -v), then the
// summary.
func printReport(w io.Writer, o *replayOptions, rep dlqtool.ReplayReport, complete bool) {
	for _, r := range rep.Results {
		if r.Outcome == dlqtool.ReplaySent && r.Err == nil && r.Detail == "" && !o.verbose {
			continue
		}
		line := fmt.Sprintf("%-25s dlq=%s broker=%s event=%s", r.Outcome, r.Letter.StoreID, dash(r.Letter.Broker), dash(r.Letter.EventID))
		if r.Topic != "" {
			line += " topic=" + r.Topic
		}
		if r.SentMsgID != "" {
			line += " sent=" + r.SentMsgID
		}
		if r.Detail != "" {
			line += ": " + r.Detail
		}
		if r.Err != nil {
			line += ": " + r.Err.Error()
		}
		fmt.Fprintln(w, line)
	}
	s := rep.Summary
	mode := ""
	if o.dryRun {
		mode = " (dry run: nothing sent or recorded)"
	}
	fmt.Fprintf(w, "dlq replay group=%s replay=%s via %s operator=%s%s\n", o.group, rep.ReplayID, rmq.RetryTopic(o.group), o.operator, mode)
	superseded := "" // said only when there are some: the line scripts read stays as it was
	if s.SkippedSuperseded > 0 {
		superseded = fmt.Sprintf(", superseded by an edit %d", s.SkippedSuperseded)
	}
	fmt.Fprintf(w, "selected %d, sent %d, would send %d, skipped: already replayed %d, uncertain %d, already processed %d, no origin %d%s; failed %d\n",
		s.Selected, s.Sent, s.WouldSend, s.SkippedReplayed, s.SkippedUncertain, s.SkippedProcessed, s.SkippedNoOrigin, superseded, s.Failed)
	if s.Unrecorded > 0 {
		fmt.Fprintf(w, "%d sent letters could not be marked sent in the audit (rows stay \"sending\")\n", s.Unrecorded)
	}
	if !complete {
		fmt.Fprintln(w, "the DLQ scan was incomplete: letters it did not reach were not considered")
	}
}

// incompleteError is the exit of a run whose selection was incomplete (exit 1), else nil.
func incompleteError(complete bool) error {
	if complete {
		return nil
	}
	return failure(errors.New("the DLQ scan was incomplete (see above): not every letter was considered"))
}

// replayExit returns nil when every selected letter was sent (or would be, in a dry run) or needed no
// replay (already replayed or processed, or superseded by an edit) and the selection was complete; else an
// exit-1 error.
func replayExit(s dlqtool.ReplaySummary, complete bool) error {
	var why []string
	for _, c := range []struct {
		n    int
		what string
	}{{s.Failed, "failed"}, {s.SkippedNoOrigin, "skipped for no origin topic"}, {s.SkippedUncertain, "skipped as uncertain"},
		{s.Unrecorded, "sent but not recorded in the audit"}} {
		if c.n > 0 {
			why = append(why, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(why) > 0 {
		return failure(errors.New("not every letter was replayed: " + strings.Join(why, ", ")))
	}
	return incompleteError(complete)
}
