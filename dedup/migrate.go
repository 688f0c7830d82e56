package dedup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"testing/fstest"
	"text/template"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/rmqguard/rmqguard/internal/dedupsql"
)

// migrationFiles are the dedup schema's goose SQL migrations as text/template sources: {{.Processed}},
// {{.Aggregate}} and {{.Lease}} stand for the table names of a tableNames (see renderMigrations).
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations returns the dedup schema's migrations (goose SQL files) for the default table names, for
// tools that run migrations themselves; migrationsFor gives them for a prefix.
func migrations() fs.FS {
	fsys, err := renderMigrations(tableNames{})
	if err != nil {
		panic(err) // the embedded templates are fixed at compile time, and tested
	}
	return fsys
}

// migrationsFor returns the dedup schema's migrations (goose SQL files) creating and altering the tables
// of t, for tools that run migrations themselves; record them in t.version(). It returns an error when an
// embedded template fails to render, which the package's tests rule out.
func migrationsFor(t tableNames) (fs.FS, error) { return renderMigrations(t) }

// renderMigrations executes each embedded migration template with t's table names, into an in-memory
// file system. The names are safe to write into SQL text: newTableNames admits only letters, digits and '_'.
func renderMigrations(t tableNames) (fs.FS, error) {
	files, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("dedup: migrations: %w", err)
	}
	names := struct{ Processed, Aggregate, Lease string }{t.processed(), t.aggregate(), t.lease()}
	out := make(fstest.MapFS, len(files))
	for _, f := range files {
		tmpl, err := template.ParseFS(migrationFiles, f)
		if err != nil {
			return nil, fmt.Errorf("dedup: migration %s: %w", f, err)
		}
		var b bytes.Buffer
		if err := tmpl.Option("missingkey=error").Execute(&b, names); err != nil {
			return nil, fmt.Errorf("dedup: migration %s: %w", f, err)
		}
		out[path.Base(f)] = &fstest.MapFile{Data: b.Bytes(), Mode: 0o444}
	}
	return out, nil
}

// Migrate applies the dedup schema (processed_event, aggregate_version, event_lease) to db, a MySQL or
// MariaDB database, recording the migrations in versionTable; WithTablePrefix is the one option it takes.
// Several processes may run it at once: they serialise on a MySQL named lock (GET_LOCK). It returns the
// migrations it applied (none when current). Errors: an invalid option (named, with why); a migration's
// error, wrapped.
func Migrate(ctx context.Context, db *sql.DB, opts ...Option) ([]string, error) {
	t, err := tablesOption("Migrate", opts)
	if err != nil {
		return nil, err
	}
	fsys, err := renderMigrations(t)
	if err != nil {
		return nil, err
	}
	return RunMigrations(ctx, db, fsys, t.version())
}

// RunMigrations applies the goose SQL migrations in fsys to db, recording them in versionTable, while
// holding a MySQL named lock on versionTable (lock-wait up to 60 s). It is exported so that an
// application can migrate its own business schema the same way, with its own version table.
func RunMigrations(ctx context.Context, db *sql.DB, fsys fs.FS, versionTable string) ([]string, error) {
	p, err := goose.NewProvider(goose.DialectMySQL, db, fsys,
		goose.WithTableName(versionTable),
		goose.WithSessionLocker(&namedLock{name: migrationLockName(versionTable), wait: 60 * time.Second}),
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

// migrationLockName is the named lock of versionTable's migrations: "rmqguard:" + versionTable, or, when
// that exceeds MySQL's 64 characters for lock names, "rmqguard:" and 32 hex digits of its SHA-256.
func migrationLockName(versionTable string) string {
	name := "rmqguard:" + versionTable
	if len(name) <= dedupsql.MaxIdentifierLength {
		return name
	}
	sum := sha256.Sum256([]byte(versionTable))
	return "rmqguard:" + hex.EncodeToString(sum[:16])
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
