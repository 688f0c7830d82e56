package dlq

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/rmqguard/rmqguard/internal/migrate"
)

// auditVersionTable is the goose version table of the replay audit schema, apart from the dedup schema's
// so that the two evolve independently.
const auditVersionTable = "rmqguard_dlq_db_version"

//go:embed migrations/*.sql
var auditMigrations embed.FS

// Migrate creates or upgrades the replay audit table (dlq_replay) in db, the dedup database, and returns
// the migrations it applied. A Monitor reads the table; `rmqguard dlq replay` runs Migrate itself.
// Errors: a migration failing, wrapped.
func Migrate(ctx context.Context, db *sql.DB) ([]string, error) {
	sub, err := fs.Sub(auditMigrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("dlq: migrate: %w", err)
	}
	applied, err := migrate.Up(ctx, db, sub, auditVersionTable)
	if err != nil {
		return applied, fmt.Errorf("dlq: migrate: %w", err)
	}
	return applied, nil
}
