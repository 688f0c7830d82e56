package dedup

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// openPingTimeout bounds Open's first connection to the server.
const openPingTimeout = 10 * time.Second

// Open opens a pool on dsn (a go-sql-driver/mysql DSN), checks that it connects (within 10 s or ctx's end),
// applies the migrations (Migrate) and returns NewStore on that pool with WithTxDSN(dsn) and opts (a WithTxDSN
// among them takes dsn's place). The Store owns the pool: Close closes it. Use Migrate and NewStore when
// another tool migrates or the pool is shared. Errors name the failed step (an empty dsn, open, connect,
// migrate, NewStore) and wrap its error; on failure nothing stays open.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	if dsn == "" {
		return nil, fmt.Errorf("dedup: Open: dsn is empty (a go-sql-driver/mysql DSN, e.g. app:secret@tcp(127.0.0.1:3306)/shop?parseTime=true)")
	}
	db, err := sqlx.Open("mysql", dsn)
	if err != nil {
		return nil, fmt.Errorf("dedup: Open: %w", err)
	}
	s, err := openOn(ctx, db, dsn, opts)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.owned = db
	return s, nil
}

// openOn connects, migrates and builds the Store for Open.
func openOn(ctx context.Context, db *sqlx.DB, dsn string, opts []Option) (*Store, error) {
	var c storeConfig
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("dedup: Open: an option is nil")
		}
		if err := opt.apply(&c); err != nil {
			return nil, fmt.Errorf("dedup: Open: %w", err)
		}
	}
	var migrateOpts []Option // Migrate takes the table prefix only
	if c.prefixed {
		migrateOpts = append(migrateOpts, WithTablePrefix(c.tables.prefix))
	}
	if c.txDSN == "" {
		opts = append([]Option{WithTxDSN(dsn)}, opts...)
	}
	pingCtx, cancel := context.WithTimeout(ctx, openPingTimeout)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		return nil, fmt.Errorf("dedup: Open: connect: %w", err)
	}
	if _, err := Migrate(ctx, db.DB, migrateOpts...); err != nil {
		return nil, fmt.Errorf("dedup: Open: %w", err)
	}
	s, err := NewStore(db, opts...)
	if err != nil {
		return nil, fmt.Errorf("dedup: Open: %w", err)
	}
	return s, nil
}
