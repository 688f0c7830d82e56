package dedup

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/dedupsql"
)

// Defaults of JanitorConfig.
const (
	// defaultJanitorInterval is the time between two purges of the leader, and between two attempts of a
	// follower to become leader.
	defaultJanitorInterval = 10 * time.Minute
	// defaultJanitorPause is the wait between two batches of a janitor's purge.
	defaultJanitorPause = 50 * time.Millisecond
)

// errLostLeadership ends a purge whose janitor no longer holds the scope's lock.
var errLostLeadership = errors.New("dedup: janitor lost leadership (its lock connection failed or the lock is gone)")

// JanitorConfig configures a Janitor. Zero fields take their defaults; see NewJanitor for the rules.
type JanitorConfig struct {
	// Scope is the dedup scope whose old rows the janitor purges (a consumer group, or WithScope's name).
	// Required.
	Scope string
	// Retention is the dedup window (`rmqguard dedup purge --older-than`). Required; at least BrokerRetention +
	// ReplayWindow unless Force.
	Retention time.Duration
	// Interval is the time between two purges; default 10 minutes.
	Interval time.Duration
	// BatchSize is the number of rows per batch; default 1000, at most 10000.
	BatchSize int
	// Pause is the wait between batches; default 50 ms.
	Pause time.Duration
	// BrokerRetention (default 72h: fileReservedTime), ReplayWindow (default 72h: how long dead letters
	// may be replayed) and Force (allows a shorter Retention) bound the dedup window.
	BrokerRetention time.Duration
	ReplayWindow    time.Duration
	Force           bool
	// TablePrefix is the prefix of the dedup tables (WithTablePrefix); default "".
	TablePrefix string
	// Logger receives leadership changes (info), purges that deleted rows (info) and errors (warn);
	// default zap.NewNop.
	Logger *zap.Logger
}

// Janitor purges one dedup scope's old processed_event rows at an interval, from inside the consumer
// processes. Of all janitors of a scope (one per process) one leads at a time: the one holding the MySQL
// named lock of the scope (GET_LOCK), taken on a connection of its own and held while leading. A lost
// connection ends the lock, and with it the leadership; the leader checks that it still holds the lock
// before each batch, and another janitor takes the lock at its next attempt.
type Janitor struct {
	db  *sqlx.DB
	cfg JanitorConfig
	// lock is the MySQL named lock the scope's leader holds: "rmqguard-dedup-janitor:" and 32 hex digits of
	// the scope's SHA-256 (lock names are at most 64 characters); with a TablePrefix, of the prefix, a NUL
	// byte and the scope, so that the janitors of two prefixed schemas do not exclude each other.
	// IS_USED_LOCK(lock) gives the leader's connection ID.
	lock    string
	leading atomic.Bool
}

// NewJanitor returns a janitor of cfg.Scope on db. It returns an error naming the field when cfg.Scope is
// empty or longer than maxGroupLength, Retention is not positive or (without Force) shorter than
// BrokerRetention + ReplayWindow (saying the least window), Interval, Pause, BrokerRetention or
// ReplayWindow is negative, BatchSize is outside 1..10000, or TablePrefix is not a valid prefix
// (WithTablePrefix); also when db is nil.
func NewJanitor(db *sqlx.DB, cfg JanitorConfig) (*Janitor, error) {
	if db == nil {
		return nil, errors.New("dedup: NewJanitor: db is nil")
	}
	if cfg.Interval == 0 {
		cfg.Interval = defaultJanitorInterval
	}
	if cfg.Pause == 0 {
		cfg.Pause = defaultJanitorPause
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	key := cfg.Scope
	if cfg.TablePrefix != "" { // janitors of one scope in two prefixed schemas purge different tables
		key = cfg.TablePrefix + "\x00" + cfg.Scope
	}
	sum := sha256.Sum256([]byte(key))
	// MySQL lock names are at most 64 characters; a scope may have 255.
	return &Janitor{db: db, cfg: cfg, lock: "rmqguard-dedup-janitor:" + hex.EncodeToString(sum[:16])}, nil
}

func (c JanitorConfig) validate() error {
	p := c.purgeConfig().WithDefaults()
	switch {
	case c.Scope == "" || utf8.RuneCountInString(c.Scope) > maxGroupLength:
		return fmt.Errorf("dedup: janitor: Scope %q must be 1 to %d characters", c.Scope, maxGroupLength)
	case c.Retention <= 0:
		return fmt.Errorf("dedup: janitor: Retention %s must be positive (the dedup window)", c.Retention)
	case c.Interval < 0:
		return fmt.Errorf("dedup: janitor: Interval %s must not be negative", c.Interval)
	case p.BatchSize < 1 || p.BatchSize > dedupsql.MaxBatch:
		return fmt.Errorf("dedup: janitor: BatchSize %d must be 1 to %d (short transactions)", c.BatchSize, dedupsql.MaxBatch)
	case c.Pause < 0:
		return fmt.Errorf("dedup: janitor: Pause %s must not be negative", c.Pause)
	case c.BrokerRetention < 0 || c.ReplayWindow < 0:
		return fmt.Errorf("dedup: janitor: BrokerRetention %s and ReplayWindow %s must not be negative", c.BrokerRetention, c.ReplayWindow)
	}
	if _, err := newTableNames(c.TablePrefix); err != nil {
		return fmt.Errorf("dedup: janitor: TablePrefix: %w", err)
	}
	return dedupsql.CheckWindow("Retention", c.Retention, p.BrokerRetention, p.ReplayWindow, c.Force)
}

func (c JanitorConfig) purgeConfig() dedupsql.Config {
	return dedupsql.Config{Scope: c.Scope, OlderThan: c.Retention, BatchSize: c.BatchSize, Pause: c.Pause,
		Force: c.Force, BrokerRetention: c.BrokerRetention, ReplayWindow: c.ReplayWindow, TablePrefix: c.TablePrefix}
}

// Run tries to lead and, while leading, purges every Interval, until ctx ends; then it releases the lock
// and returns nil. Errors of a round are logged and the next round tries again.
func (j *Janitor) Run(ctx context.Context) error {
	var conn *sql.Conn
	defer func() { j.resign(conn) }()
	for {
		if conn == nil {
			conn = j.tryLead(ctx)
		}
		if conn != nil {
			j.purgeOnce(ctx, conn)
			if !j.leading.Load() {
				conn = nil
			}
		}
		if err := dedupsql.Sleep(ctx, j.cfg.Interval); err != nil {
			return nil
		}
	}
}

// tryLead takes the scope's lock without waiting on a connection of its own; it returns that connection,
// or nil when another janitor leads or the database failed.
func (j *Janitor) tryLead(ctx context.Context) *sql.Conn {
	conn, err := j.db.Conn(ctx)
	if err != nil {
		j.cfg.Logger.Warn("dedup janitor: no connection for the leader lock", zap.String("scope", j.cfg.Scope), zap.Error(err))
		return nil
	}
	var got sql.NullInt64
	qctx, cancel := lockConnContext(ctx)
	defer cancel()
	if err := conn.QueryRowContext(qctx, "SELECT GET_LOCK(?, 0)", j.lock).Scan(&got); err != nil || got.Int64 != 1 {
		if err != nil {
			j.cfg.Logger.Warn("dedup janitor: leader lock", zap.String("scope", j.cfg.Scope), zap.Error(err))
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // GET_LOCK's result is unknown
		}
		_ = conn.Close()
		return nil
	}
	j.leading.Store(true)
	j.cfg.Logger.Info("dedup janitor: leading", zap.String("scope", j.cfg.Scope), zap.String("lock", j.lock))
	return conn
}

// purgeOnce runs one purge, checking the lock before each batch; it drops the leadership when the lock is gone.
func (j *Janitor) purgeOnce(ctx context.Context, conn *sql.Conn) {
	check := func(ctx context.Context) error {
		if ctx.Err() != nil {
			return ctx.Err() // shutting down: Run releases the lock
		}
		var mine sql.NullBool
		qctx, cancel := lockConnContext(ctx)
		defer cancel()
		err := conn.QueryRowContext(qctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", j.lock).Scan(&mine)
		if err != nil || !mine.Bool {
			j.lose(conn, err)
			return errLostLeadership
		}
		return nil
	}
	if err := check(ctx); err != nil {
		return
	}
	res, err := dedupsql.Purge(ctx, j.db, j.cfg.purgeConfig(), check)
	switch {
	case err != nil && !errors.Is(err, errLostLeadership) && ctx.Err() == nil:
		j.cfg.Logger.Warn("dedup janitor: purge failed", zap.String("scope", j.cfg.Scope), zap.Int64("rows", res.Rows), zap.Error(err))
	case res.Rows > 0 || res.Leases > 0:
		j.cfg.Logger.Info("dedup janitor: purged", zap.String("scope", j.cfg.Scope), zap.Int64("rows", res.Rows), zap.Int64("leases", res.Leases),
			zap.Int("batches", res.Batches), zap.String("cutoff_utc", res.Cutoff), zap.Duration("elapsed", res.Elapsed))
	}
}

// lose ends the leadership after the lock check failed, discarding the lock connection.
func (j *Janitor) lose(conn *sql.Conn, cause error) {
	if !j.leading.Swap(false) {
		return
	}
	j.cfg.Logger.Warn("dedup janitor: lost leadership", zap.String("scope", j.cfg.Scope), zap.Error(cause))
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// resign releases the lock (if held) and its connection when Run ends.
func (j *Janitor) resign(conn *sql.Conn) {
	if conn == nil || !j.leading.Swap(false) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if _, err := conn.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", j.lock); err != nil {
		// Never pool a connection that may still hold the lock: discarding it ends its session.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = conn.Close()
	j.cfg.Logger.Info("dedup janitor: resigned", zap.String("scope", j.cfg.Scope))
}

// lockConnContext bounds a statement on the lock connection without tying it to ctx's cancellation: the
// driver kills a connection whose statement is cancelled, and the server then frees the lock only once it
// notices, after Run has returned.
func lockConnContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
}
