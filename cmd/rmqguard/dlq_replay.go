package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql" // the MySQL driver for sqlx
	"github.com/jmoiron/sqlx"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"golang.org/x/time/rate"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dlq"
)

// replayOptions are the flags of `rmqguard dlq replay`.
type replayOptions struct {
	group, scope, targetTopic, fromFile, dsn, operator string
	since, until                                       string
	filter                                             dlq.Filter
	limit                                              int
	rate                                               float64
	dryRun, force, yes, fixPerm, verbose               bool
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
			"group) already processed is skipped, also with --force: the consumer would count it as a duplicate.\n" +
			"--dry-run decides everything and sends and records nothing. Without --yes a replay of more than one\n" +
			"letter asks on a terminal and is refused otherwise.\n\n" +
			"Exit codes: 0 every selected letter sent or nothing to do (already replayed or processed); 1 a letter\n" +
			"failed, was skipped for no origin or as uncertain, or the scan was incomplete; 2 usage error.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if cmd.Flags().Changed("timeout") {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, g.timeout)
				defer cancel()
			}
			return o.run(ctx, cmd, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.group, "group", "", "consumer group whose dead letters are replayed, and the only group that receives them (required)")
	f.StringVar(&o.since, "since", "", "only letters dead-lettered at or after this time (RFC 3339)")
	f.StringVar(&o.until, "until", "", "only letters dead-lettered before this time (RFC 3339)")
	f.StringVar(&o.filter.EventType, "event-type", "", "only letters of this event type (EVENT_TYPE, else the tag)")
	f.StringVar(&o.filter.Reason, "reason", "", "only letters whose reason contains this text")
	f.StringVar(&o.filter.Key, "key", "", "only letters with this KEYS entry or event ID")
	f.IntVar(&o.limit, "limit", 0, "scan at most this many letters (0: all); a scan cut by the limit is incomplete (exit 1)")
	f.BoolVar(&o.dryRun, "dry-run", false, "decide every letter, send and record nothing")
	f.Float64Var(&o.rate, "rate", 50, "sends per second")
	f.StringVar(&o.targetTopic, "target-topic", "", "present every replay on this topic instead of its origin (the group must subscribe it)")
	f.BoolVar(&o.force, "force", false, "send letters the audit says were sent, or may have been sent")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	f.StringVar(&o.fromFile, "from-file", "", "replay the letters of this export file (rmqguard dlq export) instead of scanning the DLQ")
	f.BoolVar(&o.fixPerm, "fix-perm", false, "if %DLQ%<group> is write-only (perm 2), make it readable (perm 6), keeping its queue counts")
	// The default is read at run time, so that --help never prints the password.
	f.StringVar(&o.dsn, "mysql-dsn", "", "MySQL DSN of the dedup database, which also holds the replay audit (default $"+envMySQLDSN+")")
	f.StringVar(&o.scope, "scope", "", "dedup scope checked for already processed events (default: the group)")
	f.StringVar(&o.operator, "operator", "", "who runs the replay, recorded in the audit and on each message (default user@host)")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "print a line for every letter, not only for those not sent")
	return cmd
}

// validate checks the flags before anything is read or sent; its errors are usage errors (exit 2).
func (o *replayOptions) validate(g *globalOptions) (ns []string, err error) {
	if o.dsn == "" {
		o.dsn = os.Getenv(envMySQLDSN)
	}
	switch {
	case strings.TrimSpace(o.group) == "":
		return nil, usageError("no group: pass --group G")
	case strings.HasPrefix(o.group, consumer.RetryTopicPrefix) || strings.HasPrefix(o.group, consumer.DLQTopicPrefix):
		return nil, usageError("--group %q: pass the consumer group, not its topic", o.group)
	case o.dsn == "":
		return nil, usageError("no database: pass --mysql-dsn or set %s (the dedup database holds the replay audit)", envMySQLDSN)
	case o.rate <= 0:
		return nil, usageError("--rate %v: must be above 0 sends per second", o.rate)
	case o.targetTopic != "" && (strings.HasPrefix(o.targetTopic, consumer.RetryTopicPrefix) || strings.HasPrefix(o.targetTopic, consumer.DLQTopicPrefix)):
		return nil, usageError("--target-topic %q: a handler must never see a %s or %s topic", o.targetTopic, consumer.RetryTopicPrefix, consumer.DLQTopicPrefix)
	case o.fromFile != "" && (o.filter != dlq.Filter{} || o.since != "" || o.until != "" || o.limit != 0):
		return nil, usageError("--from-file replays the whole file: filters and --limit apply to DLQ scans only")
	}
	for _, t := range []struct {
		flag, value string
		dst         *time.Time
	}{{"--since", o.since, &o.filter.Since}, {"--until", o.until, &o.filter.Until}} {
		if t.value == "" {
			continue
		}
		if *t.dst, err = time.Parse(time.RFC3339, t.value); err != nil {
			return nil, usageError("%s %q: not an RFC 3339 time (e.g. 2026-11-30T22:00:00Z)", t.flag, t.value)
		}
	}
	if o.operator == "" {
		o.operator = defaultOperator()
	}
	if o.fromFile != "" && o.dryRun {
		return nil, nil // nothing to read from or send to the broker
	}
	ns, err = g.requireNameServers()
	if err != nil {
		return nil, usageError("%v", err)
	}
	return ns, nil
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
	ns, err := o.validate(g)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	letters, complete, err := o.load(ctx, out, ns)
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
	report, err := o.replay(ctx, cmd, ns, letters)
	if err != nil {
		return err
	}
	printReport(out, o, report, complete)
	return replayExit(report.Summary, complete)
}

// load returns the selected letters (from the file, or a scan of the DLQ) and whether the selection is
// complete; a scan's problems are printed.
func (o *replayOptions) load(ctx context.Context, out io.Writer, ns []string) ([]dlq.Letter, bool, error) {
	if o.fromFile != "" {
		return o.loadFile()
	}
	return o.scan(ctx, out, replayCluster(ns))
}

// loadFile reads the --from-file letters; a letter of another group is a usage error.
func (o *replayOptions) loadFile() ([]dlq.Letter, bool, error) {
	letters, err := readExportFile(o.fromFile)
	if err != nil {
		return nil, false, failure(err)
	}
	for _, l := range letters {
		if l.Group != "" && l.Group != o.group {
			return nil, false, usageError("%s holds letters of group %q, not %q", o.fromFile, l.Group, o.group)
		}
	}
	return letters, true, nil
}

// scan reads the group's DLQ with the filters; a write-only DLQ is made readable with --fix-perm and
// otherwise stops the replay (F17). Partial results are returned with complete false.
func (o *replayOptions) scan(ctx context.Context, out io.Writer, cluster dlq.Cluster) ([]dlq.Letter, bool, error) {
	res, err := dlq.Scan(ctx, cluster, o.group, dlq.ScanOptions{Filter: o.filter, Limit: o.limit})
	if errors.Is(err, dlq.ErrWriteOnly) {
		if !o.fixPerm {
			return nil, false, failure(fmt.Errorf("%s is write-only (perm 2), so its letters cannot be read: pass --fix-perm to make it readable (perm 6, queue counts kept): %w",
				consumer.DLQTopic(o.group), err))
		}
		fix, fixErr := dlq.FixPerm(ctx, cluster, o.group)
		if fixErr != nil {
			return nil, false, failure(fmt.Errorf("--fix-perm: %w", fixErr))
		}
		fmt.Fprintf(out, "fixed %s: perm %d -> %d, %d read / %d write queues kept\n", fix.Topic, fix.Before, fix.After, fix.ReadQueues, fix.WriteQueues)
		res, err = dlq.Scan(ctx, cluster, o.group, dlq.ScanOptions{Filter: o.filter, Limit: o.limit})
	}
	if err != nil && len(res.Letters) == 0 {
		return nil, false, failure(fmt.Errorf("scan %s: %w", consumer.DLQTopic(o.group), err))
	}
	complete := err == nil && res.Complete
	for _, p := range res.Problems {
		fmt.Fprintf(out, "scan incomplete: %s\n", p)
	}
	if err != nil {
		fmt.Fprintf(out, "scan incomplete: %v\n", err)
	}
	return res.Letters, complete, nil
}

// readExportFile reads an export file written by `rmqguard dlq export`.
func readExportFile(path string) ([]dlq.Letter, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--from-file: %w", err)
	}
	defer func() { _ = f.Close() }()
	letters, err := dlq.ReadExport(f)
	if err != nil {
		return nil, fmt.Errorf("--from-file %s: %w", path, err)
	}
	return letters, nil
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
	fmt.Fprintf(cmd.ErrOrStderr(), "Replay %d letters of %s to group %s? [y/N] ", n, consumer.DLQTopic(o.group), o.group)
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

// replay opens the audit database and the producer and runs dlq.Replay with a progress bar on a terminal.
func (o *replayOptions) replay(ctx context.Context, cmd *cobra.Command, ns []string, letters []dlq.Letter) (dlq.ReplayReport, error) {
	db, err := sqlx.Open("mysql", o.dsn)
	if err != nil {
		return dlq.ReplayReport{}, failure(fmt.Errorf("open database: %w", err))
	}
	defer func() { _ = db.Close() }()
	if !o.dryRun {
		if _, err := dedup.RunMigrations(ctx, db.DB, dlq.AuditMigrations(), dlq.AuditVersionTable); err != nil {
			return dlq.ReplayReport{}, failure(fmt.Errorf("replay audit table: %w", err))
		}
	}
	audit, err := o.audit(ctx, db)
	if err != nil {
		return dlq.ReplayReport{}, failure(err)
	}
	processed, err := dlq.NewMySQLProcessed(db)
	if err != nil {
		return dlq.ReplayReport{}, failure(err)
	}
	cluster := replayCluster(ns)
	opts := dlq.ReplayOptions{Group: o.group, Namespace: cluster.Namespace, Scope: o.scope, TargetTopic: o.targetTopic, Force: o.force,
		DryRun: o.dryRun, Operator: o.operator, Audit: audit, Processed: processed,
		Limiter: rate.NewLimiter(rate.Limit(o.rate), 1)}
	if !o.dryRun {
		if err := checkRetryTopic(ctx, cluster, o.group); err != nil {
			return dlq.ReplayReport{}, failure(err)
		}
		prod, err := startReplayProducer(cluster)
		if err != nil {
			return dlq.ReplayReport{}, failure(err)
		}
		defer func() { _ = prod.Shutdown() }()
		opts.Sender = prod
	}
	if bar := newProgress(cmd.ErrOrStderr(), len(letters), o.dryRun); bar != nil {
		opts.Progress = func(int, int, dlq.LetterResult) { _ = bar.Add(1) }
		defer func() { _ = bar.Finish() }()
	}
	report, err := dlq.Replay(ctx, letters, opts)
	if err != nil {
		return report, usageError("%v", err)
	}
	return report, nil
}

// audit returns the MySQL audit; in a dry run before the audit table exists, an empty audit (nothing was
// ever replayed), so that a dry run creates nothing.
func (o *replayOptions) audit(ctx context.Context, db *sqlx.DB) (dlq.Audit, error) {
	if o.dryRun {
		var n int
		if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM information_schema.tables
			WHERE table_schema = DATABASE() AND table_name = ?`, dlq.AuditTable); err != nil {
			return nil, fmt.Errorf("replay audit table: %w", err)
		}
		if n == 0 {
			return noAudit{}, nil
		}
	}
	return dlq.NewMySQLAudit(db)
}

// noAudit is the audit of a database without the audit table, for a dry run: nothing was replayed.
type noAudit struct{}

func (noAudit) Lookup(context.Context, string, string) (dlq.AuditRecord, bool, error) {
	return dlq.AuditRecord{}, false, nil
}

func (noAudit) Claim(context.Context, dlq.AuditRecord, *dlq.AuditRecord) (bool, error) {
	return false, errors.New("dry run: no audit")
}

func (noAudit) Finish(context.Context, dlq.AuditRecord) error { return errors.New("dry run: no audit") }

// incompleteError is the exit of a run whose selection was incomplete (exit 1), else nil.
func incompleteError(complete bool) error {
	if complete {
		return nil
	}
	return failure(errors.New("the DLQ scan was incomplete (see above): not every letter was considered"))
}

// replayExit returns nil when every selected letter was sent (or would be, in a dry run) or needed no
// replay (already replayed or processed) and the selection was complete; else an exit-1 error.
func replayExit(s dlq.ReplaySummary, complete bool) error {
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
