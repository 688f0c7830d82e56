package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql" // the MySQL driver for sqlx
	"github.com/jmoiron/sqlx"
	"github.com/spf13/cobra"

	"github.com/rmqguard/rmqguard/internal/dedupsql"
)

// envMySQLDSN provides the default of --mysql-dsn.
const envMySQLDSN = "RMQGUARD_MYSQL_DSN"

func newDedupCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dedup",
		Short: "Maintain the dedup table (processed_event, or <prefix>processed_event with --table-prefix)",
	}
	cmd.AddCommand(newDedupPurgeCmd(g))
	return cmd
}

// purgeOptions are the flags of `rmqguard dedup purge`.
type purgeOptions struct {
	dsn string
	cfg dedupsql.Config
}

func newDedupPurgeCmd(g *globalOptions) *cobra.Command {
	o := &purgeOptions{}
	cmd := &cobra.Command{
		Use:   "purge --group G --older-than 168h",
		Short: "Delete a dedup scope's processed_event rows older than the dedup window, in small batches",
		Long: "Delete the processed_event rows of one dedup scope (--group: the consumer group, or the scope\n" +
			"given to dedup.WithScope) whose consumed_at (the database's UTC clock) is older than --older-than,\n" +
			"--batch rows per short transaction, safe while consumers run. A window shorter than\n" +
			"--broker-retention + --replay-window is refused unless --force: a purged key lets a message the\n" +
			"broker still holds, or a replayed dead letter, apply twice. --dry-run counts and deletes nothing.\n" +
			"--table-prefix names the dedup tables' prefix (dedup.WithTablePrefix): rows are deleted from\n" +
			"<prefix>processed_event. The global --timeout applies only when given; Ctrl-C stops between batches.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := commandContext(cmd, g)
			defer cancel()
			return o.run(ctx, cmd)
		},
	}
	f := cmd.Flags()
	// The default is read at run time, so that --help never prints the password.
	f.StringVar(&o.dsn, "mysql-dsn", "", "MySQL DSN of the dedup database (default $"+envMySQLDSN+")")
	f.StringVar(&o.cfg.Scope, "group", "", "dedup scope: the consumer group, or its dedup.WithScope name (required)")
	f.DurationVar(&o.cfg.OlderThan, "older-than", 0, "dedup window: delete rows consumed longer ago than this, e.g. 168h (required)")
	f.IntVar(&o.cfg.BatchSize, "batch", dedupsql.DefaultBatch, fmt.Sprintf("rows per batch (1 to %d)", dedupsql.MaxBatch))
	f.DurationVar(&o.cfg.Pause, "pause", 25*time.Millisecond, "wait between batches; the default keeps the claims of running consumers within about 2x their latency (make bench-purge), 0 purges fastest")
	f.BoolVar(&o.cfg.DryRun, "dry-run", false, "count the rows that would be deleted, delete nothing")
	f.BoolVar(&o.cfg.Force, "force", false, "allow a window shorter than --broker-retention + --replay-window")
	f.DurationVar(&o.cfg.BrokerRetention, "broker-retention", dedupsql.DefaultBrokerRetention, "the broker's message retention (fileReservedTime)")
	f.DurationVar(&o.cfg.ReplayWindow, "replay-window", dedupsql.DefaultReplayWindow, "how long dead letters may be replayed")
	f.StringVar(&o.cfg.TablePrefix, "table-prefix", "", "prefix of the dedup tables, as given to dedup.WithTablePrefix (default none: processed_event)")
	return cmd
}

func (o *purgeOptions) run(ctx context.Context, cmd *cobra.Command) error {
	if o.dsn == "" {
		o.dsn = os.Getenv(envMySQLDSN)
	}
	switch {
	case o.dsn == "":
		return errors.New("no database: pass --mysql-dsn or set " + envMySQLDSN)
	case o.cfg.Scope == "":
		return errors.New("no scope: pass --group G")
	case o.cfg.OlderThan == 0:
		return errors.New("no window: pass --older-than, e.g. 168h")
	}
	if err := dedupsql.CheckPrefix(o.cfg.TablePrefix); err != nil {
		return fmt.Errorf("--table-prefix: %w", err)
	}
	if err := o.cfg.Validate(); err != nil { // before connecting
		return err
	}
	db, err := sqlx.Open("mysql", o.dsn)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer func() { _ = db.Close() }()
	res, err := dedupsql.Purge(ctx, db, o.cfg, nil)
	out := cmd.OutOrStdout()
	verb := "deleted"
	if o.cfg.DryRun {
		verb = "would delete"
	}
	head := "dedup purge"
	if o.cfg.TablePrefix != "" {
		head += " table=" + o.cfg.TablePrefix + dedupsql.ProcessedTable
	}
	fmt.Fprintf(out, "%s group=%s: %s %d rows in %d batches of at most %d (consumed_at < %s UTC) in %s, %.0f rows/s\n",
		head, o.cfg.Scope, verb, res.Rows, res.Batches, o.cfg.BatchSize, res.Cutoff, res.Elapsed.Round(time.Millisecond), res.RowsPerSecond())
	if res.Leases > 0 {
		fmt.Fprintf(out, "%s group=%s: %s %d expired lease rows (lease mode, lease_until < %s UTC)\n", head, o.cfg.Scope, verb, res.Leases, res.Cutoff)
	}
	return err
}
