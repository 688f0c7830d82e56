package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/jmoiron/sqlx"
	"github.com/spf13/pflag"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// dbFlags are the flags of the dedup database, which holds the replay audit: `dlq replay` records there,
// `dlq list` reads each letter's replay status there.
type dbFlags struct {
	dsn, scope  string
	tablePrefix string // dedup.WithTablePrefix of the consumer's store
}

// addDBFlags registers --mysql-dsn, --scope and --table-prefix; what says what the database is for.
func (f *dbFlags) addDBFlags(fs *pflag.FlagSet, what string) {
	// The default is read at run time, so that --help never prints the password.
	fs.StringVar(&f.dsn, "mysql-dsn", "", "MySQL DSN of the dedup database, which "+what+" (default $"+envMySQLDSN+")")
	fs.StringVar(&f.scope, "scope", "", "dedup scope checked for already processed events (default: the group)")
	fs.StringVar(&f.tablePrefix, "table-prefix", "", "prefix of the dedup tables, as given to dedup.WithTablePrefix (default none: processed_event)")
}

// validateDB fills the DSN from the environment and checks the table prefix (a usage error).
func (f *dbFlags) validateDB() error {
	if f.dsn == "" {
		f.dsn = os.Getenv(envMySQLDSN)
	}
	if err := dedupsql.CheckPrefix(f.tablePrefix); err != nil {
		return usageError("--table-prefix: %v", err)
	}
	return nil
}

// processedChecker is what tells whether the scope processed an event: the processed_event table, or with
// --table-prefix a dedup store on the prefixed tables (NewStore checks that they exist).
func (f *dbFlags) processedChecker(db *sqlx.DB) (dlqtool.ProcessedChecker, error) {
	if f.tablePrefix == "" {
		return dlqtool.NewMySQLProcessed(db)
	}
	store, err := dedup.NewStore(db, dedup.WithTablePrefix(f.tablePrefix))
	if err != nil {
		return nil, fmt.Errorf("--table-prefix: %w", err)
	}
	return store, nil // no WithTxDSN: Close has nothing to close
}

// readAudit returns the MySQL audit; before the audit table exists (no replay ever ran on this database),
// an empty audit: nothing was replayed. Nothing is created.
func readAudit(ctx context.Context, db *sqlx.DB) (dlqtool.Audit, error) {
	var n int
	if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name = ?`, dlqtool.AuditTable); err != nil {
		return nil, fmt.Errorf("replay audit table: %w", err)
	}
	if n == 0 {
		return noAudit{}, nil
	}
	return dlqtool.NewMySQLAudit(db)
}

// letterStatuses reads the replay status of letters of group in namespace ns from the database, or
// returns nil (status unknown) when no DSN is given.
func (f *dbFlags) letterStatuses(ctx context.Context, group, ns string, letters []dlqtool.Letter) ([]dlqtool.LetterStatus, error) {
	if f.dsn == "" || len(letters) == 0 {
		return nil, nil
	}
	db, err := sqlx.Open("mysql", f.dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	defer func() { _ = db.Close() }()
	audit, err := readAudit(ctx, db)
	if err != nil {
		return nil, err
	}
	processed, err := f.processedChecker(db)
	if err != nil {
		return nil, err
	}
	return dlqtool.Statuses(ctx, letters, dlqtool.StatusOptions{Group: group, Namespace: ns, Scope: f.scope,
		Audit: audit, Processed: processed})
}

// noAudit is the audit of a database without the audit table, for a dry run and for the status of
// letters: nothing was replayed.
type noAudit struct{}

func (noAudit) Lookup(context.Context, string, string) (dlqtool.AuditRecord, bool, error) {
	return dlqtool.AuditRecord{}, false, nil
}

func (noAudit) Claim(context.Context, dlqtool.AuditRecord, *dlqtool.AuditRecord) (bool, error) {
	return false, errors.New("dry run: no audit")
}

func (noAudit) Finish(context.Context, dlqtool.AuditRecord) error {
	return errors.New("dry run: no audit")
}
