package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// editOptions are the flags of `rmqguard dlq edit`.
type editOptions struct {
	scanFlags                            // --group, event ID flags, --fix-perm
	dbFlags                              // --mysql-dsn, --scope, --table-prefix
	id, body, bodyFile, operator, target string
	dryRun, yes, force                   bool
}

// maxEditedBody is the largest body `dlq edit` reads: the audit's MEDIUMBLOB holds 16 MiB (the broker's own
// limit, 4 MiB by default, is usually lower and refuses the send).
const maxEditedBody = 16<<20 - 1

func newDLQEditCmd(g *globalOptions) *cobra.Command {
	o := &editOptions{}
	cmd := &cobra.Command{
		Use:   "edit --group G --id ID (--body-file F | --body TEXT | --body -) [--dry-run] [--yes]",
		Short: "Replay one dead letter with a corrected body, under the same event ID; the letter is superseded",
		Long: "Replay the letter of %DLQ%<group> whose store ID (or DLQ message ID) is ID with the body read from\n" +
			"--body-file, --body TEXT, or stdin (--body -), byte for byte, instead of its own: as `dlq replay` sends\n" +
			"it (to %RETRY%<group>, the original topic restored) with the same EVENT_ID, KEYS, TAGS and user\n" +
			"properties, so the consumer's dedup still applies: if the event was applied meanwhile, the edited copy\n" +
			"is a duplicate. It prints the bodies' difference first, then asks on a terminal (refused without\n" +
			"one) unless --yes; --dry-run prints the difference and what would be sent, and sends and records nothing.\n\n" +
			"The dlq_replay audit records the letter's body, the edited body, the operator and the time, in the\n" +
			"claim made before the send: from then on the letter is SUPERSEDED: `dlq replay` skips it (also with\n" +
			"--force), `dlq list` and `dlq show` say so, and it is not edited again unless that send failed (or,\n" +
			"with --force, while its send is uncertain). An edited copy that fails again is a new letter\n" +
			"(RMQGUARD_REPLAY_OF names this one): edit or replay that one. A letter already replayed, or whose\n" +
			"event the dedup scope processed, is refused as `dlq replay` skips it. The edited body must keep the\n" +
			"event ID where the consumer reads it (a letter without EVENT_ID property: its JSON field).\n\n" +
			"Exit codes: 0 sent (or, with --dry-run, would be sent); 1 not sent (refused, failed, not found);\n" +
			"2 usage error.",
		Args: exactArgs(0, "no argument"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := commandContext(cmd, g)
			defer cancel()
			return o.run(ctx, cmd, g)
		},
	}
	f := cmd.Flags()
	o.addScanFlags(f, false)
	f.StringVar(&o.id, "id", "", "store ID of the letter (dlq show prints it), or its DLQ message ID as dlq list prints it (required)")
	f.StringVar(&o.bodyFile, "body-file", "", "read the edited body from this file")
	f.StringVar(&o.body, "body", "", "the edited body itself; - reads it from stdin")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the difference and what would be sent; send and record nothing")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	f.BoolVar(&o.force, "force", false, "edit a letter a replay sent, or may have sent; or edit again after an edit whose send is uncertain")
	f.StringVar(&o.target, "target-topic", "", "present the edited copy on this topic instead of the letter's origin (the group must subscribe it)")
	o.addDBFlags(f, "also holds the replay audit")
	f.StringVar(&o.operator, "operator", "", "who edits, recorded in the audit and on the message (default user@host)")
	return cmd
}

// validate checks the flags before anything is read or sent; its errors are usage errors (exit 2).
func (o *editOptions) validate() (dlqtool.ScanOptions, error) {
	opts, err := o.options(time.Now())
	if err != nil {
		return opts, err
	}
	if err := o.validateDB(); err != nil {
		return opts, err
	}
	switch {
	case strings.TrimSpace(o.id) == "":
		return opts, usageError("--id is required: the letter's store ID (`rmqguard dlq show` prints it)")
	case (o.body == "") == (o.bodyFile == ""):
		return opts, usageError("pass the edited body with exactly one of --body-file F, --body TEXT or --body - (stdin)")
	}
	if err := checkSendFlags(o.group, o.dsn, o.target); err != nil {
		return opts, err
	}
	if o.operator == "" {
		o.operator = defaultOperator()
	}
	return opts, nil
}

func (o *editOptions) run(ctx context.Context, cmd *cobra.Command, g *globalOptions) error {
	scanOpts, err := o.validate()
	if err != nil {
		return err
	}
	edited, err := o.readBody(cmd.InOrStdin())
	if err != nil {
		return err
	}
	l, err := o.find(ctx, cmd, g, scanOpts)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "letter %s of %s on broker %s: event %s, origin topic %s, reason: %s\n", l.StoreID, l.Topic, dash(l.Broker),
		dash(l.EventID), dash(l.OriginTopic), dash(oneLine(l.Reason)))
	writeBodyDiff(out, l.Body, edited)
	if err := o.confirm(cmd, l); err != nil {
		return err
	}
	opts, closeEnv, err := openReplayEnv(ctx, g, &o.dbFlags, o.group, o.dryRun)
	if err != nil {
		return err
	}
	defer closeEnv()
	opts.TargetTopic, opts.Force, opts.Operator = o.target, o.force, o.operator
	res, err := dlqtool.ReplayEdited(ctx, l, edited, opts)
	if err != nil {
		return usageError("%v", err)
	}
	return o.report(out, res, len(edited))
}

// readBody reads the edited body from --body-file, --body TEXT or stdin (--body -); an empty or too large
// body is a usage error.
func (o *editOptions) readBody(stdin io.Reader) ([]byte, error) {
	var (
		b   []byte
		err error
	)
	switch {
	case o.bodyFile != "":
		var f *os.File
		if f, err = os.Open(o.bodyFile); err != nil {
			return nil, usageError("--body-file: %v", err)
		}
		defer func() { _ = f.Close() }()
		b, err = io.ReadAll(io.LimitReader(f, maxEditedBody+1))
	case o.body == "-":
		b, err = io.ReadAll(io.LimitReader(stdin, maxEditedBody+1))
	default:
		b = []byte(o.body)
	}
	switch {
	case err != nil:
		return nil, failure(fmt.Errorf("read the edited body: %w", err))
	case len(b) == 0:
		return nil, usageError("the edited body is empty (the broker refuses an empty body)")
	case len(b) > maxEditedBody:
		return nil, usageError("the edited body is larger than %d bytes", maxEditedBody)
	}
	return b, nil
}

// find scans the group's DLQ for the letter whose store ID, or DLQ message ID, is --id. Not found is a
// failure (exit 1); a message ID that several letters share is a usage error naming their store IDs.
func (o *editOptions) find(ctx context.Context, cmd *cobra.Command, g *globalOptions, opts dlqtool.ScanOptions) (dlqtool.Letter, error) {
	res, err := o.scanDLQ(ctx, cmd, g, opts)
	if err != nil {
		return dlqtool.Letter{}, err
	}
	var byStore, byMsg []dlqtool.Letter
	for _, l := range res.Letters {
		switch o.id {
		case l.StoreID:
			byStore = append(byStore, l)
		case l.MsgID:
			byMsg = append(byMsg, l)
		}
	}
	switch {
	case len(byStore) == 1:
		return byStore[0], nil
	case len(byMsg) == 1:
		return byMsg[0], nil
	case len(byMsg) > 1:
		ids := make([]string, len(byMsg))
		for i, l := range byMsg {
			ids[i] = l.StoreID
		}
		return dlqtool.Letter{}, usageError("%d letters have message ID %s (dead-lettered more than once): pass one's store ID as --id: %s",
			len(byMsg), o.id, strings.Join(ids, ", "))
	}
	_ = reportIncomplete(cmd.ErrOrStderr(), res)
	return dlqtool.Letter{}, failure(fmt.Errorf("no letter whose store ID or message ID is %s on %s (`rmqguard dlq list` lists them)", o.id, res.Topic))
}

// confirm asks before sending unless --yes or --dry-run: on a terminal it reads y/yes from stdin; without
// a terminal it refuses.
func (o *editOptions) confirm(cmd *cobra.Command, l dlqtool.Letter) error {
	if o.yes || o.dryRun {
		return nil
	}
	if !isTerminal(cmd.InOrStdin()) {
		return usageError("refusing to send an edited letter without confirmation: pass --yes (or --dry-run to see what would be sent)")
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Send letter %s with the edited body to group %s, superseding the letter? [y/N] ", l.StoreID, o.group)
	answer, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return failure(errors.New("edit not confirmed: nothing sent"))
	}
	return nil
}

// report prints the edit's result and returns its exit: nil when sent (or, in a dry run, would be), else
// exit 1.
func (o *editOptions) report(w io.Writer, res dlqtool.LetterResult, size int) error {
	l := res.Letter
	switch res.Outcome {
	case dlqtool.ReplayWouldSend:
		fmt.Fprintf(w, "would send %d bytes to %s, presented on topic %s, with EVENT_ID %s and the letter's other properties; the letter would be superseded\n",
			size, rmq.RetryTopic(o.group), res.Topic, l.EventID)
	case dlqtool.ReplaySent:
		fmt.Fprintf(w, "sent %d bytes to %s as %s, presented on topic %s, with EVENT_ID %s; letter %s is superseded\n",
			size, rmq.RetryTopic(o.group), res.SentMsgID, res.Topic, l.EventID, l.StoreID)
	default:
		line := fmt.Sprintf("%s dlq=%s event=%s", res.Outcome, l.StoreID, dash(l.EventID))
		if res.Detail != "" {
			line += ": " + res.Detail
		}
		if res.Err != nil {
			line += ": " + res.Err.Error()
		}
		fmt.Fprintln(w, line)
	}
	if res.Detail != "" && (res.Outcome == dlqtool.ReplaySent || res.Outcome == dlqtool.ReplayWouldSend) {
		fmt.Fprintln(w, "note:", res.Detail)
	}
	mode := ""
	if o.dryRun {
		mode = " (dry run: nothing sent or recorded)"
	}
	fmt.Fprintf(w, "dlq edit group=%s operator=%s%s\n", o.group, o.operator, mode)
	switch {
	case res.Outcome == dlqtool.ReplaySent && res.Err != nil:
		return failure(fmt.Errorf("sent, but not recorded in the audit: %w", res.Err))
	case res.Outcome == dlqtool.ReplaySent, res.Outcome == dlqtool.ReplayWouldSend:
		return nil
	}
	return failure(fmt.Errorf("letter %s not sent: %s", l.StoreID, res.Outcome))
}
