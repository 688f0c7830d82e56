package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// insertOld inserts n committed processed_event rows of scope, consumed hoursAgo hours ago by the database's
// UTC clock (one microsecond apart), with event IDs prefix-1 … prefix-n. n must be a MariaDB Sequence table
// size (seq_1_to_n).
func insertOld(t testing.TB, db *sqlx.DB, scope, prefix string, n, hoursAgo int) {
	t.Helper()
	_, err := db.Exec(fmt.Sprintf(`INSERT INTO processed_event
		(consumer_group, event_id, topic, msg_id, consumed_at, result_status)
		SELECT ?, CONCAT(?, '-', seq), 'T', 'm', UTC_TIMESTAMP(6) - INTERVAL ? HOUR - INTERVAL seq MICROSECOND, 'SUCCESS'
		FROM seq_1_to_%d`, n), scope, prefix, hoursAgo)
	require.NoError(t, err)
}

func scopeRows(t testing.TB, db *sqlx.DB, scope string) int {
	t.Helper()
	var n int
	require.NoError(t, db.Get(&n, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ?`, scope))
	return n
}

// deleteScope removes a test's rows (in batches: the scope may hold many).
func deleteScope(db *sqlx.DB, scope string) {
	for {
		r, err := db.Exec(`DELETE FROM processed_event WHERE consumer_group = ? LIMIT 10000`, scope)
		if err != nil {
			return
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return
		}
	}
}

// F22: a window shorter than broker retention + DLQ replay window is refused, with the reason, before
// anything is deleted; forced, it runs.
func TestF22_PurgeWindowShorterThanRetentionPlusReplayIsRefusedUnlessForced(t *testing.T) {
	db := businessDB(t)
	scope := testenv.Unique("purge")
	t.Cleanup(func() { deleteScope(db, scope) })
	insertOld(t, db, scope, scope, 10, 30)

	_, err := dedupsql.Purge(context.Background(), db, dedupsql.Config{Scope: scope, OlderThan: 24 * time.Hour}, nil)
	require.ErrorIs(t, err, dedupsql.ErrWindowTooShort)
	assert.Contains(t, err.Error(), "broker retention 72h0m0s + replay window 72h0m0s = 144h0m0s")
	assert.Contains(t, err.Error(), "apply a second time")
	assert.Equal(t, 10, scopeRows(t, db, scope), "nothing deleted")

	_, err = dedupsql.Purge(context.Background(), db, dedupsql.Config{Scope: scope, OlderThan: 24 * time.Hour,
		BrokerRetention: 12 * time.Hour, ReplayWindow: 6 * time.Hour}, nil)
	require.NoError(t, err, "24h covers a broker keeping messages 12h and a 6h replay window")
	assert.Zero(t, scopeRows(t, db, scope))

	insertOld(t, db, scope, scope, 10, 30)
	res, err := dedupsql.Purge(context.Background(), db, dedupsql.Config{Scope: scope, OlderThan: 24 * time.Hour, Force: true}, nil)
	require.NoError(t, err)
	assert.EqualValues(t, 10, res.Rows)
	assert.Zero(t, scopeRows(t, db, scope))
}

func TestF22_InvalidPurgeAndJanitorConfigNamesTheField(t *testing.T) {
	db := businessDB(t)
	ok := dedupsql.Config{Scope: "s", OlderThan: 200 * time.Hour}
	for field, cfg := range map[string]dedupsql.Config{
		"Scope":     {OlderThan: 200 * time.Hour},
		"OlderThan": {Scope: "s"},
		"BatchSize": {Scope: "s", OlderThan: 200 * time.Hour, BatchSize: dedupsql.MaxBatch + 1},
		"Pause":     {Scope: "s", OlderThan: 200 * time.Hour, Pause: -time.Second},
	} {
		err := cfg.Validate()
		require.Error(t, err, field)
		assert.Contains(t, err.Error(), field)
	}
	require.NoError(t, ok.Validate())

	okJ := dedup.JanitorConfig{Scope: "s", Retention: 200 * time.Hour}
	_, err := dedup.NewJanitor(db, okJ)
	require.NoError(t, err)
	for field, cfg := range map[string]dedup.JanitorConfig{
		"Scope":     {Retention: 200 * time.Hour},
		"Retention": {Scope: "s", Retention: 100 * time.Hour},
		"Interval":  {Scope: "s", Retention: 200 * time.Hour, Interval: -time.Second},
		"BatchSize": {Scope: "s", Retention: 200 * time.Hour, BatchSize: -1},
		"Pause":     {Scope: "s", Retention: 200 * time.Hour, Pause: -time.Second},
	} {
		_, err := dedup.NewJanitor(db, cfg)
		require.Error(t, err, field)
		assert.Contains(t, err.Error(), field)
	}
	_, err = dedup.NewJanitor(db, dedup.JanitorConfig{Scope: "s", Retention: 100 * time.Hour})
	assert.ErrorIs(t, err, dedupsql.ErrWindowTooShort)
}

// F22: only the old rows of the purged scope go, in batches of at most BatchSize; recent rows and other
// scopes stay. A dry run counts and deletes nothing.
func TestF22_PurgeDeletesOnlyOldRowsOfItsScopeInBoundedBatches(t *testing.T) {
	db := businessDB(t)
	scope, other := testenv.Unique("purge"), testenv.Unique("purge-other")
	t.Cleanup(func() { deleteScope(db, scope); deleteScope(db, other) })
	insertOld(t, db, scope, scope+"-old", 25, 200)
	insertOld(t, db, scope, scope+"-new", 10, 100) // younger than the 168 h window
	insertOld(t, db, other, other+"-old", 10, 200)
	cfg := dedupsql.Config{Scope: scope, OlderThan: 168 * time.Hour, BatchSize: 7, DryRun: true}

	res, err := dedupsql.Purge(context.Background(), db, cfg, nil)
	require.NoError(t, err)
	assert.EqualValues(t, 25, res.Rows, "dry run: rows that would be deleted")
	assert.Equal(t, 4, res.Batches)
	assert.Equal(t, 35, scopeRows(t, db, scope), "a dry run deletes nothing")

	cfg.DryRun = false
	res, err = dedupsql.Purge(context.Background(), db, cfg, nil)
	require.NoError(t, err)
	assert.EqualValues(t, 25, res.Rows)
	assert.Equal(t, 4, res.Batches, "25 rows in batches of at most 7")
	assert.Positive(t, res.RowsPerSecond())
	var left []string
	require.NoError(t, db.Select(&left, `SELECT event_id FROM processed_event WHERE consumer_group = ? AND event_id LIKE ?`, scope, scope+"-old-%"))
	assert.Empty(t, left, "every old row of the scope is gone")
	assert.Equal(t, 10, scopeRows(t, db, scope), "the recent rows stay")
	assert.Equal(t, 10, scopeRows(t, db, other), "another scope's old rows stay")

	res, err = dedupsql.Purge(context.Background(), db, cfg, nil)
	require.NoError(t, err)
	assert.Zero(t, res.Rows)
	assert.Zero(t, res.Batches)
}

// F22: consumed_at is the database's clock in UTC, whatever the session's time zone (+05:00 here) and the
// consumer host's clock.
func TestF22_ConsumedAtIsTheDatabaseUTCClock(t *testing.T) {
	base := businessDB(t)
	cfg, err := mysql.ParseDSN(testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN))
	require.NoError(t, err)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+05:00'"
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var offset int
	require.NoError(t, db.Get(&offset, `SELECT TIMESTAMPDIFF(MINUTE, UTC_TIMESTAMP(), NOW())`))
	require.Equal(t, 300, offset, "the session is not on UTC")

	f := newFixture(t)
	f.db = base
	f.store, err = dedup.NewStore(db)
	require.NoError(t, err)
	h := f.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil
	})
	var before, after, consumed string
	const ts = `DATE_FORMAT(%s, '%%Y-%%m-%%d %%H:%%i:%%s.%%f')`
	require.NoError(t, db.Get(&before, `SELECT `+fmt.Sprintf(ts, "UTC_TIMESTAMP(6)")))
	o, err := f.handle(h, f.orderMsg(t, f.prefix+"-e", f.prefix+"-1"))
	require.NoError(t, err)
	require.Equal(t, consumer.KindProcessed, o.Kind)
	require.NoError(t, db.Get(&after, `SELECT `+fmt.Sprintf(ts, "UTC_TIMESTAMP(6)")))
	require.NoError(t, db.Get(&consumed, `SELECT `+fmt.Sprintf(ts, "consumed_at")+` FROM processed_event
		WHERE consumer_group = ? AND event_id = ?`, f.group, f.prefix+"-e"))
	assert.LessOrEqual(t, before, consumed, "consumed_at is the database's UTC_TIMESTAMP(6) at the claim")
	assert.LessOrEqual(t, consumed, after)
}

// F22: of two janitors of one scope, one leads; the other takes over when the leader's lock connection is
// lost (killed on the server), and the leader then knows it no longer leads. The leader purges.
func TestF22_TwoJanitorsOneLeader(t *testing.T) {
	db := businessDB(t)
	scope := testenv.Unique("janitor")
	t.Cleanup(func() { deleteScope(db, scope) })
	insertOld(t, db, scope, scope, 100, 200)
	ctx, cancel := context.WithCancel(context.Background())
	janitors := make([]*dedup.Janitor, 2)
	var wg sync.WaitGroup
	for i := range janitors {
		j, err := dedup.NewJanitor(db, dedup.JanitorConfig{Scope: scope, Retention: 168 * time.Hour,
			Interval: 50 * time.Millisecond, BatchSize: 10, Pause: time.Millisecond})
		require.NoError(t, err)
		janitors[i] = j
		wg.Go(func() { _ = j.Run(ctx) })
	}
	defer func() { cancel(); wg.Wait() }()
	leaders := func() (n int, leader int) {
		for i, j := range janitors {
			if j.Leading() {
				n, leader = n+1, i
			}
		}
		return n, leader
	}
	require.Eventually(t, func() bool { n, _ := leaders(); return n == 1 }, 5*time.Second, 10*time.Millisecond)
	for range 50 { // never two leaders
		n, _ := leaders()
		require.LessOrEqual(t, n, 1)
		time.Sleep(10 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return scopeRows(t, db, scope) == 0 }, 10*time.Second, 50*time.Millisecond, "the leader purges")

	_, first := leaders()
	var holder int64
	lock := janitors[0].LockName()
	require.Equal(t, lock, janitors[1].LockName())
	require.NoError(t, db.Get(&holder, `SELECT IS_USED_LOCK(?)`, lock))
	_, err := db.Exec(fmt.Sprintf("KILL CONNECTION %d", holder))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, leader := leaders()
		return n == 1 && leader != first
	}, 5*time.Second, 10*time.Millisecond, "the other janitor leads once the leader's connection is gone")
	assert.False(t, janitors[first].Leading())

	cancel()
	wg.Wait()
	n, _ := leaders()
	assert.Zero(t, n, "stopped janitors do not lead")
	var free int
	require.NoError(t, db.Get(&free, `SELECT IS_FREE_LOCK(?)`, lock))
	assert.Equal(t, 1, free, "the lock is released when Run ends")
}

// F22: purging 100,000 old rows of a scope while 8 goroutines claim new events of the same scope at full
// rate (the real Begin/Claim/Confirm/Commit path): no claim sees a lock-wait timeout (1205) or a deadlock
// (1213), nor any other error, and every new row stays.
func TestF22_PurgeWhileEightGoroutinesClaimSeesNo1205Or1213(t *testing.T) {
	f := newFixture(t)
	t.Cleanup(func() { deleteScope(f.db, f.group) })
	insertOld(t, f.db, f.group, f.prefix+"-old", 100000, 200)
	h := f.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil
	})
	ctx, stop := context.WithCancel(context.Background())
	var claims, lockErrs, otherErrs atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				id := fmt.Sprintf("%s-new-%d-%d", f.prefix, i, n)
				o, err := f.handle(h, f.orderMsg(t, id, id))
				var me *mysql.MySQLError
				switch {
				case errors.As(err, &me) && (me.Number == mysqlerr.ErLockWaitTimeout || me.Number == mysqlerr.ErLockDeadlock):
					lockErrs.Add(1)
				case err != nil || o.Kind != consumer.KindProcessed:
					otherErrs.Add(1)
					t.Logf("claim %s: %v %v", id, o, err)
				default:
					claims.Add(1)
				}
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // claims at full rate before the purge starts
	res, err := dedupsql.Purge(context.Background(), f.db, dedupsql.Config{Scope: f.group, OlderThan: 168 * time.Hour}, nil)
	stop()
	wg.Wait()

	require.NoError(t, err)
	assert.EqualValues(t, 100000, res.Rows)
	assert.Equal(t, 100, res.Batches, "batches of the default 1000 rows")
	assert.Zero(t, lockErrs.Load(), "claims saw 1205/1213")
	assert.Zero(t, otherErrs.Load(), "claims failed")
	assert.Positive(t, claims.Load())
	assert.EqualValues(t, claims.Load(), scopeRows(t, f.db, f.group), "every claimed row stays, every old one is gone")
	t.Logf("purged %d rows in %d batches at %.0f rows/s while %d claims committed", res.Rows, res.Batches, res.RowsPerSecond(), claims.Load())
}
