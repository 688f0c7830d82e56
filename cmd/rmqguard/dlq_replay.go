package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // the MySQL driver for sqlx
	"github.com/jmoiron/sqlx"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"golang.org/x/time/rate"

	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// replayOptions are the flags of `rmqguard dlq replay`.
type replayOptions struct {
	scanFlags                       // --group, the filters, --limit, event ID flags, --fix-perm
	dbFlags                         // --mysql-dsn, --scope, --table-prefix
	targetTopic, fromFile, operator string
	rate                            float64
	dryRun, force, yes, verbose     bool
}

func newDLQReplayCmd(g *globalOptions) *cobra.Command {
	o := &replayOptions{}
	cmd := &cobra.Command{
		Use:   "replay --group G [filters] [--dry-run] [--rate 50] [--target-topic T] [--force] [--yes]",
		Short: "Send dead letters back to the one consumer group that dead-lettered them, once",
		Long: "Replay the letters of %DLQ%<group> (or of an export file, --from-file) to that group alone: each is\n" +
			"sent to %RETRY%<group> with RETRY_TOPIC set to its original topic, so the group's handlers see the\n" +
			"original topic and no other group on that topic receives it. Body, TAGS, KEYS and user properties are\n" +
			"kept; broker bookkeeping is dropped; RMQGUARD_REPLAY_* provenance is added. A letter with no origin\n" +
			"topic is skipped unless --target-topic (a topic the group subscribes).\n\n" +
			"Safe twice: each letter is claimed in the dlq_replay audit table (created in the --mysql-dsn database\n" +
			"on first use) before it is sent; a letter already sent, or claimed by a replay that did not record\n" +
			"its send, is skipped unless --force. A letter whose event ID the dedup scope (--scope, default the\n" +
			"group) already processed is skipped, also with --force: the consumer would count it as a duplicate\n" +
			"(its row in processed_event, or <prefix>processed_event with --table-prefix). A letter superseded by\n" +
			"`dlq edit` (sent with an edited body) is skipped, also with --force.\n" +
			"--dry-run decides everything and sends and records nothing. Without --yes a replay of more than one\n" +
			"letter asks on a terminal and is refused otherwise. The global --timeout applies only when given;\n" +
			"Ctrl-C stops between letters.\n\n" +
			"Exit codes: 0 every selected letter sent or nothing to do (already replayed, processed or superseded); 1 a letter\n" +
			"failed, was skipped for no origin or as uncertain, or the scan was incomplete; 2 usage error.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := commandContext(cmd, g)
			defer cancel()
			return o.run(ctx, cmd, g)
		},
	}
	f := cmd.Flags()
	o.addScanFlags(f, true)
	f.BoolVar(&o.dryRun, "dry-run", false, "decide every letter, send and record nothing")
	f.Float64Var(&o.rate, "rate", 50, "sends per second")
	f.StringVar(&o.targetTopic, "target-topic", "", "present every replay on this topic instead of its origin (the group must subscribe it)")
	f.BoolVar(&o.force, "force", false, "send letters the audit says were sent, or may have been sent")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	f.StringVar(&o.fromFile, "from-file", "", "replay the letters of this export file (rmqguard dlq export) instead of scanning the DLQ")
	o.addDBFlags(f, "also holds the replay audit")
	f.StringVar(&o.operator, "operator", "", "who runs the replay, recorded in the audit and on each message (default user@host)")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "print a line for every letter, not only for those not sent")
	return cmd
}

// validate checks the flags before anything is read or sent and returns the scan options; its errors are
// usage errors (exit 2).
func (o *replayOptions) validate() (dlqtool.ScanOptions, error) {
	opts, err := o.options(time.Now())
	if err != nil {
		return opts, err
	}
	if err := o.validateDB(); err != nil {
		return opts, err
	}
	if err := checkSendFlags(o.group, o.dsn, o.targetTopic); err != nil {
		return opts, err
	}
	switch {
	case o.rate <= 0:
		return opts, usageError("--rate %v: must be above 0 sends per second", o.rate)
	case o.fromFile != "" && (opts.Filter != dlqtool.Filter{} || opts.Limit != 0 || o.fixPerm):
		return opts, usageError("--from-file replays the whole file: filters, --limit and --fix-perm apply to DLQ scans only")
	}
	if o.operator == "" {
		o.operator = defaultOperator()
	}
	return opts, nil
}

// checkSendFlags is what `dlq replay` and `dlq edit` both check before they send: group is a consumer group
// (not its %RETRY% or %DLQ% topic), a database holds the audit, and target ("" = the origin) is a topic a
// handler may see. Its errors are usage errors.
func checkSendFlags(group, dsn, target string) error {
	switch {
	case strings.HasPrefix(group, rmq.RetryTopicPrefix) || strings.HasPrefix(group, rmq.DLQTopicPrefix):
		return usageError("--group %q: pass the consumer group, not its topic", group)
	case dsn == "":
		return usageError("no database: pass --mysql-dsn or set %s (the dedup database holds the replay audit)", envMySQLDSN)
	case target != "" && (strings.HasPrefix(target, rmq.RetryTopicPrefix) || strings.HasPrefix(target, rmq.DLQTopicPrefix)):
		return usageError("--target-topic %q: a handler must never see a %s or %s topic", target, rmq.RetryTopicPrefix, rmq.DLQTopicPrefix)
	}
	return nil
}

// defaultOperator is user@host, or what of it is known.
func defaultOperator() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		name += "@" + host
	}
	return name
}

func (o *replayOptions) run(ctx context.Context, cmd *cobra.Command, g *globalOptions) error {
	scanOpts, err := o.validate()
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	letters, complete, err := o.load(ctx, cmd, g, scanOpts)
	if err != nil {
		return err
	}
	if len(letters) == 0 {
		fmt.Fprintf(out, "dlq replay group=%s: no letter selected, nothing to replay\n", o.group)
		return incompleteError(complete)
	}
	if err := o.confirm(cmd, len(letters)); err != nil {
		return err
	}
	report, err := o.replay(ctx, cmd, g, letters)
	if err != nil {
		return err
	}
	printReport(out, o, report, complete)
	return replayExit(report.Summary, complete)
}

// load returns the selected letters (from the file, or a scan of the DLQ) and whether the selection is
// complete; an incomplete scan's or export's problems are printed to stderr.
func (o *replayOptions) load(ctx context.Context, cmd *cobra.Command, g *globalOptions, opts dlqtool.ScanOptions) ([]dlqtool.Letter, bool, error) {
	if o.fromFile != "" {
		return o.loadFile(cmd.ErrOrStderr())
	}
	// A write-only DLQ is an error naming perm 2 and --fix-perm, or made readable with it (F17).
	res, err := o.scanDLQ(ctx, cmd, g, opts)
	if err != nil {
		return nil, false, err
	}
	_ = reportIncomplete(cmd.ErrOrStderr(), res)
	return res.Letters, res.Complete, nil
}

// loadFile reads the --from-file letters; a file of another group is a usage error, and one exported from
// an incomplete scan is incomplete.
func (o *replayOptions) loadFile(stderr io.Writer) ([]dlqtool.Letter, bool, error) {
	h, letters, err := readExportFile(o.fromFile)
	if err != nil {
		return nil, false, failure(err)
	}
	if h.Group != o.group {
		return nil, false, usageError("%s holds letters of group %q, not %q", o.fromFile, h.Group, o.group)
	}
	if !h.Complete {
		fmt.Fprintf(stderr, "rmqguard: %s was exported from an incomplete scan; missing letters possible:\n", o.fromFile)
		for _, p := range h.Problems {
			fmt.Fprintln(stderr, "  -", p)
		}
	}
	return letters, h.Complete, nil
}

// readExportFile reads an export file written by `rmqguard dlq export`.
func readExportFile(path string) (dlqtool.ExportHeader, []dlqtool.Letter, error) {
	f, err := os.Open(path)
	if err != nil {
		return dlqtool.ExportHeader{}, nil, fmt.Errorf("--from-file: %w", err)
	}
	defer func() { _ = f.Close() }()
	h, letters, err := dlqtool.ReadExportFile(f)
	if err != nil {
		return h, nil, fmt.Errorf("--from-file %s: %w", path, err)
	}
	return h, letters, nil
}

// confirm asks before a replay of more than one letter unless --yes or --dry-run: on a terminal it reads
// y/yes from stdin; without a terminal it refuses.
func (o *replayOptions) confirm(cmd *cobra.Command, n int) error {
	if o.yes || o.dryRun || n <= 1 {
		return nil
	}
	if !isTerminal(cmd.InOrStdin()) {
		return usageError("refusing to replay %d letters without confirmation: pass --yes (or --dry-run to see what would be sent)", n)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Replay %d letters of %s to group %s? [y/N] ", n, rmq.DLQTopic(o.group), o.group)
	answer, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return failure(errors.New("replay not confirmed: nothing sent"))
	}
	return nil
}

// isTerminal reports whether r is a terminal.
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// replay opens the audit database and the producer and runs dlqtool.Replay with a progress bar on a terminal.
func (o *replayOptions) replay(ctx context.Context, cmd *cobra.Command, g *globalOptions, letters []dlqtool.Letter) (dlqtool.ReplayReport, error) {
	opts, closeEnv, err := openReplayEnv(ctx, g, &o.dbFlags, o.group, o.dryRun)
	if err != nil {
		return dlqtool.ReplayReport{}, err
	}
	defer closeEnv()
	opts.TargetTopic, opts.Force, opts.Operator = o.targetTopic, o.force, o.operator
	opts.Limiter = rate.NewLimiter(rate.Limit(o.rate), 1)
	if bar := newProgress(cmd.ErrOrStderr(), len(letters), o.dryRun); bar != nil {
		opts.Progress = func(int, int, dlqtool.LetterResult) { _ = bar.Add(1) }
		defer func() { _ = bar.Finish() }()
	}
	report, err := dlqtool.Replay(ctx, letters, opts)
	if err != nil {
		return report, usageError("%v", err)
	}
	return report, nil
}

// openReplayEnv opens what `dlq replay` and `dlq edit` send through: the database (the audit table migrated
// unless dryRun; in a dry run before it exists, an empty audit), the processed check, the cluster's
// namespace and, unless dryRun, the producer after checking group's retry topic. The options it returns
// have Group, Scope, Namespace, DryRun, Audit, Processed and Sender set; closeEnv releases them.
func openReplayEnv(ctx context.Context, g *globalOptions, f *dbFlags, group string, dryRun bool) (opts dlqtool.ReplayOptions, closeEnv func(), err error) {
	var closers []func()
	closeEnv = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeEnv()
		}
	}()
	db, err := sqlx.Open("mysql", f.dsn)
	if err != nil {
		return opts, closeEnv, failure(fmt.Errorf("open database: %w", err))
	}
	closers = append(closers, func() { _ = db.Close() })
	if !dryRun {
		if _, err := dlq.Migrate(ctx, db.DB); err != nil {
			return opts, closeEnv, failure(fmt.Errorf("replay audit table: %w", err))
		}
	}
	audit, err := replayAudit(ctx, db, dryRun)
	if err != nil {
		return opts, closeEnv, failure(err)
	}
	processed, err := f.processedChecker(db)
	if err != nil {
		return opts, closeEnv, failure(err)
	}
	opts = dlqtool.ReplayOptions{Group: group, Scope: f.scope, DryRun: dryRun, Audit: audit, Processed: processed}
	// A dry run of a file needs no name server; the namespace still keys the audit.
	cluster, clusterErr := dlqCluster(g)
	opts.Namespace = cluster.Namespace
	if dryRun {
		return opts, closeEnv, nil
	}
	if clusterErr != nil {
		return opts, closeEnv, clusterErr
	}
	if err := dlqtool.CheckRetryTopic(ctx, cluster, group); err != nil {
		return opts, closeEnv, failure(err)
	}
	prod, err := startReplayProducer(cluster)
	if err != nil {
		return opts, closeEnv, failure(err)
	}
	closers = append(closers, func() { _ = prod.Shutdown() })
	opts.Sender = prod
	return opts, closeEnv, nil
}
