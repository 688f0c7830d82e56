package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/outboxadmin"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/outbox"
)

// outboxFlags are the flags every outbox command takes.
type outboxFlags struct {
	dsn, prefix string
}

func (o *outboxFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.dsn, "mysql-dsn", "", "MySQL DSN of the dedup database (default $"+envMySQLDSN+")")
	cmd.Flags().StringVar(&o.prefix, "table-prefix", "", "prefix of the dedup tables, as given to dedup.WithTablePrefix")
}

// open opens the database and returns it with --table-prefix, checked.
func (o *outboxFlags) open() (*sqlx.DB, string, error) {
	if o.dsn == "" {
		o.dsn = os.Getenv(envMySQLDSN)
	}
	if o.dsn == "" {
		return nil, "", errors.New("no database: pass --mysql-dsn or set " + envMySQLDSN)
	}
	if err := dedupsql.CheckPrefix(o.prefix); err != nil {
		return nil, "", fmt.Errorf("--table-prefix: %w", err)
	}
	db, err := sqlx.Open("mysql", o.dsn)
	if err != nil {
		return nil, "", fmt.Errorf("open database: %w", err)
	}
	return db, o.prefix, nil
}

// with runs fn with the command's context and the database and table prefix of the flags, closing the database after.
func (o *outboxFlags) with(cmd *cobra.Command, g *globalOptions, fn func(context.Context, *sqlx.DB, string) error) error {
	ctx, cancel := commandContext(cmd, g)
	defer cancel()
	db, prefix, err := o.open()
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	if err := fn(ctx, db, prefix); err != nil {
		if mysqlerr.MissingTable(err) {
			return fmt.Errorf("%w (no outbox in this database under --table-prefix %q: the application creates %s%s with outbox.Migrate)",
				err, prefix, prefix, outboxsql.Table)
		}
		return err
	}
	return nil
}

func newOutboxCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "outbox", Short: "Relay, inspect and maintain the outbox (<prefix>rmqguard_outbox)"}
	cmd.AddCommand(newOutboxRelayCmd(g), newOutboxListCmd(g), newOutboxRetryCmd(g), newOutboxPurgeCmd(g))
	return cmd
}

func newOutboxRelayCmd(g *globalOptions) *cobra.Command {
	o := &outboxFlags{}
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Send the outbox's messages until interrupted (effects need the application's own relay)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(g.nameServers) == 0 {
				return errors.New("no name server: pass --namesrv")
			}
			return o.with(cmd, g, func(ctx context.Context, db *sqlx.DB, prefix string) error {
				store, err := dedup.NewStore(db, dedup.WithTablePrefix(prefix))
				if err != nil {
					return err
				}
				log, _ := zap.NewProduction()
				ob, err := outbox.New(store, outbox.Config{NameServers: g.nameServers, Credentials: g.access.credentials(), Namespace: g.access.namespace, Logger: log})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "outbox relay: sending %s%s to %v until interrupted\n", prefix, outboxsql.Table, g.nameServers)
				return ob.Run(ctx)
			})
		},
	}
	o.register(cmd)
	return cmd
}

func newOutboxListCmd(g *globalOptions) *cobra.Command {
	o := &outboxFlags{}
	var status string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--status parked]",
		Short: "List outbox rows not yet sent (pending and parked), oldest first, with their last error",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.with(cmd, g, func(ctx context.Context, db *sqlx.DB, prefix string) error {
				rows, err := outboxadmin.List(ctx, db, prefix, status, limit)
				if err != nil {
					return err
				}
				w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tKIND\tSTATUS\tATTEMPTS\tNAME\tTOPIC\tSOURCE EVENT\tCREATED (UTC)\tLAST ERROR")
				for _, r := range rows {
					fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Kind, r.Status, r.Attempts, r.Name, r.Topic,
						r.SourceEventID, r.CreatedAt.Format(time.DateTime), r.LastError)
				}
				return w.Flush()
			})
		},
	}
	o.register(cmd)
	cmd.Flags().StringVar(&status, "status", "", "pending, parked or sent (default: pending and parked)")
	cmd.Flags().IntVar(&limit, "limit", 100, "rows at most")
	return cmd
}

func newOutboxRetryCmd(g *globalOptions) *cobra.Command {
	o := &outboxFlags{}
	var all bool
	cmd := &cobra.Command{
		Use:   "retry ID... | --all-parked",
		Short: "Make parked rows pending again (attempts reset), after fixing what parked them",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return errors.New("give row IDs or --all-parked, not both or neither")
			}
			ids := make([]int64, 0, len(args))
			for _, a := range args {
				id, err := strconv.ParseInt(a, 10, 64)
				if err != nil {
					return fmt.Errorf("row ID %q: %w", a, err)
				}
				ids = append(ids, id)
			}
			return o.with(cmd, g, func(ctx context.Context, db *sqlx.DB, prefix string) error {
				n, err := outboxadmin.Retry(ctx, db, prefix, ids...)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "outbox retry: %d parked rows pending again\n", n)
				return nil
			})
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVar(&all, "all-parked", false, "every parked row")
	return cmd
}

func newOutboxPurgeCmd(g *globalOptions) *cobra.Command {
	o := &outboxFlags{}
	var older time.Duration
	var batch int
	cmd := &cobra.Command{
		Use:   "purge --older-than 168h",
		Short: "Delete rows sent longer ago than --older-than, in batches; pending and parked rows stay",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if older <= 0 {
				return errors.New("no window: pass --older-than, e.g. 168h")
			}
			return o.with(cmd, g, func(ctx context.Context, db *sqlx.DB, prefix string) error {
				n, err := outboxadmin.Purge(ctx, db, prefix, older, batch)
				fmt.Fprintf(cmd.OutOrStdout(), "outbox purge: deleted %d sent rows older than %s\n", n, older)
				return err
			})
		},
	}
	o.register(cmd)
	cmd.Flags().DurationVar(&older, "older-than", 0, "delete rows sent longer ago than this (required)")
	cmd.Flags().IntVar(&batch, "batch", 1000, "rows per DELETE")
	return cmd
}
