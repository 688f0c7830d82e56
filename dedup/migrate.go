package dedup

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"testing/fstest"
	"text/template"

	"github.com/rmqguard/rmqguard/internal/migrate"
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
	return migrate.Up(ctx, db, fsys, t.version())
}
