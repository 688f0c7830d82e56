package outbox

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

	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/migrate"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrate creates or updates the outbox table prefix + "rmqguard_outbox" (prefix: the dedup Store's
// TablePrefix) in db, recording the migrations in prefix + "rmqguard_outbox_version"; safe from several
// processes at once (they take turns on a MySQL named lock). It returns the migrations it applied.
// Errors: a prefix that dedup.WithTablePrefix would refuse; the migration's error, wrapped.
func Migrate(ctx context.Context, db *sql.DB, prefix string) ([]string, error) {
	if err := dedupsql.CheckPrefix(prefix); err != nil {
		return nil, fmt.Errorf("outbox: table prefix: %w", err)
	}
	files, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("outbox: migrations: %w", err)
	}
	names := struct{ Outbox string }{prefix + outboxsql.Table}
	out := make(fstest.MapFS, len(files))
	for _, f := range files {
		tmpl, err := template.ParseFS(migrationFiles, f)
		if err != nil {
			return nil, fmt.Errorf("outbox: migration %s: %w", f, err)
		}
		var b bytes.Buffer
		if err := tmpl.Option("missingkey=error").Execute(&b, names); err != nil {
			return nil, fmt.Errorf("outbox: migration %s: %w", f, err)
		}
		out[path.Base(f)] = &fstest.MapFile{Data: b.Bytes(), Mode: 0o444}
	}
	applied, err := migrate.Up(ctx, db, out, prefix+outboxsql.VersionTable)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return applied, nil
}
