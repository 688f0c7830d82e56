package dedup

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// VersionTable is the table in which goose records the dedup schema's applied migrations.
const VersionTable = "rmqguard_dedup_db_version"

// Migrations returns the embedded dedup schema migrations (goose SQL files), for tools that run
// migrations themselves.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embedded folder is fixed at compile time
	}
	return sub
}

// Migrate applies the dedup schema (the processed_event and aggregate_version tables) to db, a MySQL or MariaDB database.
// It is safe to run from several processes at once: they serialise on a MySQL named lock (GET_LOCK).
// It returns the migrations it applied; none when the schema is current.
func Migrate(ctx context.Context, db *sql.DB) ([]string, error) {
	return RunMigrations(ctx, db, Migrations(), VersionTable)
}

// RunMigrations applies the goose SQL migrations in fsys to db, recording them in versionTable, while
// holding a MySQL named lock on versionTable (lock-wait up to 60 s). It is exported so that an
// application can migrate its own business schema the same way, with its own version table.
func RunMigrations(ctx context.Context, db *sql.DB, fsys fs.FS, versionTable string) ([]string, error) {
	p, err := goose.NewProvider(goose.DialectMySQL, db, fsys,
		goose.WithTableName(versionTable),
		goose.WithSessionLocker(&namedLock{name: "rmqguard:" + versionTable, wait: 60 * time.Second}),
	)
	if err != nil {
		return nil, fmt.Errorf("migrate %s: %w", versionTable, err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate %s: %w", versionTable, err)
	}
	applied := make([]string, 0, len(results))
	for _, r := range results {
		applied = append(applied, r.Source.Path)
	}
	return applied, nil
}

// namedLock is a goose SessionLocker on MySQL's GET_LOCK/RELEASE_LOCK, held by one connection.
type namedLock struct {
	name string
	wait time.Duration
}

func (l *namedLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", l.name, int(l.wait.Seconds())).Scan(&got); err != nil {
		return fmt.Errorf("get lock %s: %w", l.name, err)
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("get lock %s: not granted within %s", l.name, l.wait)
	}
	return nil
}

func (l *namedLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", l.name); err != nil {
		return fmt.Errorf("release lock %s: %w", l.name, err)
	}
	return nil
}
