// Package migrate runs rmqguard's goose SQL migrations (the dedup schema, the outbox table, the DLQ audit
// table, the example domain's tables) on MySQL or MariaDB, several processes at once serialised on a
// named lock, each schema recorded in a version table of its own.
package migrate

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/rmqguard/rmqguard/internal/dedupsql"
)

// Up applies the goose SQL migrations in fsys to db, recording them in versionTable, while holding a MySQL
// named lock on versionTable (lock-wait up to 60 s). It returns the paths of the migrations it applied
// (none when current); errors are wrapped with versionTable.
func Up(ctx context.Context, db *sql.DB, fsys fs.FS, versionTable string) ([]string, error) {
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
