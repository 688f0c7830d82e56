package dedup_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"io/fs"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// scratchDBWithDSN is scratchDB that also returns the DSN of the new database (for WithTxDSN).
func scratchDBWithDSN(t *testing.T) (*sqlx.DB, string) {
	t.Helper()
	db := scratchDB(t)
	var name string
	require.NoError(t, db.Get(&name, `SELECT DATABASE()`))
	cfg, err := mysql.ParseDSN(testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN))
	require.NoError(t, err)
	cfg.DBName = name
	return db, cfg.FormatDSN()
}

// tablesOf lists the tables of db's current database, sorted.
func tablesOf(t *testing.T, db *sqlx.DB) []string {
	t.Helper()
	var names []string
	require.NoError(t, db.Select(&names, `SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()`))
	sort.Strings(names)
	return names
}

// createTableOf returns SHOW CREATE TABLE of table with its name replaced by "T", to compare two tables' shapes.
func createTableOf(t *testing.T, db *sqlx.DB, table string) string {
	t.Helper()
	var name, ddl string
	require.NoError(t, db.QueryRow("SHOW CREATE TABLE "+table).Scan(&name, &ddl))
	return strings.Replace(ddl, "`"+table+"`", "`T`", 1)
}

// Migrations with a prefix create exactly the prefixed tables, shaped like the default
// ones; running them again applies nothing; the default migration still creates the default names.
func TestTablePrefix_MigrateCreatesExactlyThePrefixedTables(t *testing.T) {
	db := scratchDB(t)
	ctx := context.Background()

	applied, err := dedup.Migrate(ctx, db.DB, dedup.WithTablePrefix("billing_"))
	require.NoError(t, err)
	assert.Equal(t, []string{"00001_processed_event.sql", "00002_claim_token.sql", "00003_purge_index.sql",
		"00004_aggregate_version.sql", "00005_event_lease.sql"}, applied)
	assert.Equal(t, []string{"billing_aggregate_version", "billing_event_lease", "billing_processed_event", "billing_rmqguard_dedup_db_version"},
		tablesOf(t, db), "the prefixed tables, and no default one")
	again, err := dedup.Migrate(ctx, db.DB, dedup.WithTablePrefix("billing_"))
	require.NoError(t, err)
	assert.Empty(t, again, "the prefixed version table records what was applied")

	_, err = dedup.NewStore(db)
	require.ErrorIs(t, err, dedup.ErrSchema, "the default store does not see the prefixed tables")
	assert.Contains(t, err.Error(), "the table is missing from the current database; fix: run dedup.Migrate")

	_, err = dedup.Migrate(ctx, db.DB)
	require.NoError(t, err)
	assert.Equal(t, []string{"aggregate_version", "billing_aggregate_version", "billing_event_lease", "billing_processed_event",
		"billing_rmqguard_dedup_db_version", "event_lease", "processed_event", "rmqguard_dedup_db_version"}, tablesOf(t, db))
	assert.Equal(t, createTableOf(t, db, "processed_event"), createTableOf(t, db, "billing_processed_event"))
	assert.Equal(t, createTableOf(t, db, "aggregate_version"), createTableOf(t, db, "billing_aggregate_version"))
	assert.Equal(t, createTableOf(t, db, "event_lease"), createTableOf(t, db, "billing_event_lease"))
}

// prefixedChain is one service's chain on its own prefixed tables: EventID → Dedup → Version (table mode)
// → a handler appending a row to effect (no unique key: a second apply would show).
func prefixedChain(t *testing.T, db *sqlx.DB, prefix string, opts ...dedup.Option) (*dedup.Store, consumer.Handler) {
	t.Helper()
	_, err := dedup.Migrate(context.Background(), db.DB, dedup.WithTablePrefix(prefix))
	require.NoError(t, err)
	store, err := dedup.NewStore(db, append(opts, dedup.WithTablePrefix(prefix))...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })
	assert.Equal(t, prefix+"processed_event", dedup.StoreTableNames(store)[0])
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	version, err := middleware.Version(store, middleware.VersionConfig{AggregateType: "order", Require: true})
	require.NoError(t, err, "the prefixed aggregate_version table is found")
	h := dedup.Handle(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO effect (service, event_id) VALUES (?, ?)`, prefix, d.EventID)
		return consumer.Processed(), err
	})
	return store, testenv.Must(middleware.Chain(h, middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store)), version))
}

// Two stores with different prefixes in one database are independent: the same event ID, in
// the same consumer group, is processed once by each (its second delivery a duplicate in each), each
// schema holds its own row and aggregate version, and each store's Probe, Processed and Purge see its
// own table only. One store runs on its own transaction pool (WithTxDSN), the other on db's.
func TestTablePrefix_TwoStoresInOneDatabaseAreIndependent(t *testing.T) {
	db, dsn := scratchDBWithDSN(t)
	ctx := context.Background()
	_, err := db.Exec(`CREATE TABLE effect (service VARCHAR(64) NOT NULL, event_id VARCHAR(128) NOT NULL)`)
	require.NoError(t, err)
	storeA, a := prefixedChain(t, db, "svc_a_", dedup.WithTxDSN(dsn))
	storeB, b := prefixedChain(t, db, "svc_b_")

	group, ev := testenv.Unique("cg"), testenv.Unique("ev")
	deliver := func(h consumer.Handler) consumer.Kind {
		msg := &primitive.MessageExt{MsgId: testenv.Unique("msg"), Message: primitive.Message{Topic: "ORDER"}}
		msg.WithProperty("EVENT_ID", ev)
		msg.WithProperty("AGGREGATE_ID", "o-1")
		msg.WithProperty("AGGREGATE_VERSION", "1")
		o, err := h.Handle(ctx, testenv.NewDelivery(group, msg))
		require.NoError(t, err)
		return o.Kind
	}
	assert.Equal(t, consumer.KindProcessed, deliver(a))
	assert.Equal(t, consumer.KindProcessed, deliver(b), "B has not processed the event A processed")
	assert.Equal(t, consumer.KindDuplicate, deliver(a))
	assert.Equal(t, consumer.KindDuplicate, deliver(b))

	for _, p := range []string{"svc_a_", "svc_b_"} {
		var effects, rows int
		var v int64
		require.NoError(t, db.Get(&effects, `SELECT COUNT(*) FROM effect WHERE service = ? AND event_id = ?`, p, ev))
		require.NoError(t, db.Get(&rows, `SELECT COUNT(*) FROM `+p+`processed_event WHERE consumer_group = ? AND event_id = ?`, group, ev))
		require.NoError(t, db.Get(&v, `SELECT version FROM `+p+`aggregate_version WHERE consumer_group = ? AND aggregate_id = 'o-1'`, group))
		assert.Equal(t, 1, effects, "%s: one effect", p)
		assert.Equal(t, 1, rows, "%s: one dedup row", p)
		assert.Equal(t, int64(1), v, "%s: its own stored version", p)
	}
	require.NoError(t, storeA.Probe(ctx))
	require.NoError(t, storeB.Probe(ctx))

	// A's rows, made old, are purged from A's table only; B still has the event.
	_, err = db.Exec(`UPDATE svc_a_processed_event SET consumed_at = consumed_at - INTERVAL 200 HOUR`)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE svc_b_processed_event SET consumed_at = consumed_at - INTERVAL 200 HOUR`)
	require.NoError(t, err)
	res, err := dedupsql.Purge(ctx, db, dedupsql.Config{Scope: group, OlderThan: 168 * time.Hour, TablePrefix: "svc_a_"}, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(1), res.Rows)
	gone, err := storeA.Processed(ctx, group, ev)
	require.NoError(t, err)
	kept, err := storeB.Processed(ctx, group, ev)
	require.NoError(t, err)
	assert.False(t, gone, "purged from svc_a_processed_event")
	assert.True(t, kept, "svc_b_processed_event untouched")
}

// An invalid prefix fails NewStore, Migrate, CheckSchema, PurgeConfig.Validate and NewJanitor
// before any statement, naming the option (or field) and why; options other than WithTablePrefix are
// refused by Migrate, naming them.
func TestTablePrefix_InvalidPrefixFailsNamingTheOption(t *testing.T) {
	raw, err := sql.Open("mysql", "nobody:x@tcp(127.0.0.1:1)/none") // never connected: the checks come first
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	db := sqlx.NewDb(raw, "mysql")
	ctx := context.Background()

	for prefix, why := range map[string]string{
		"Billing_":                  "only lowercase ASCII letters, digits and '_'",
		"svc-a_":                    "only lowercase ASCII letters, digits and '_'",
		"x`; DROP TABLE orders; --": "only lowercase ASCII letters, digits and '_'",
		"1svc_":                     "must not start with a digit",
		"a_very_long_prefix_that_is_too_long_for_": "at most 39",
	} {
		_, err := dedup.NewStore(db, dedup.WithTablePrefix(prefix))
		require.ErrorIs(t, err, dedupsql.ErrInvalidIdentifier, prefix)
		assert.Contains(t, err.Error(), "dedup: WithTablePrefix: ", prefix)
		assert.Contains(t, err.Error(), why, prefix)

		_, err = dedup.Migrate(ctx, raw, dedup.WithTablePrefix(prefix))
		require.ErrorIs(t, err, dedupsql.ErrInvalidIdentifier, prefix)
		assert.Contains(t, err.Error(), "dedup: Migrate: dedup: WithTablePrefix: ", prefix)

		err = dedup.CheckSchema(ctx, db, dedup.WithTablePrefix(prefix))
		require.ErrorIs(t, err, dedupsql.ErrInvalidIdentifier, prefix)

		err = dedupsql.Config{Scope: "s", OlderThan: 200 * time.Hour, TablePrefix: prefix}.Validate()
		require.ErrorIs(t, err, dedupsql.ErrInvalidIdentifier, prefix)
		assert.Contains(t, err.Error(), "dedup: purge: TablePrefix: ", prefix)

		_, err = dedup.NewJanitor(db, dedup.JanitorConfig{Scope: "s", Retention: 200 * time.Hour, TablePrefix: prefix})
		require.ErrorIs(t, err, dedupsql.ErrInvalidIdentifier, prefix)
		assert.Contains(t, err.Error(), "dedup: janitor: TablePrefix: ", prefix)
	}

	_, err = dedup.NewStore(db, dedup.WithTablePrefix("a_"), dedup.WithTablePrefix("b_"))
	assert.ErrorContains(t, err, "dedup: WithTablePrefix: given twice")
	_, err = dedup.Migrate(ctx, raw, dedup.WithTablePrefix("a_"), dedup.WithScope("s"))
	assert.ErrorContains(t, err, "dedup: Migrate: takes only WithTablePrefix; WithScope configure(s) a Store")
	err = dedupsql.CheckPrefix(strings.Repeat("a", 39))
	assert.NoError(t, err, "39 characters: the version table has 64")
}

// Without a prefix nothing changes: the default names, the migrations' text (no template left,
// the default names in it), and the janitor's lock name (the scope's hash alone); with a prefix the lock
// differs, so the janitors of two schemas do not exclude each other.
func TestTablePrefix_DefaultIsUnchanged(t *testing.T) {
	def, err := dedup.NewTableNames("")
	require.NoError(t, err)
	assert.Equal(t, []string{"processed_event", "aggregate_version", "event_lease", "rmqguard_dedup_db_version"},
		dedup.TableNames(def))
	assert.Equal(t, dedup.TableNames(def), dedup.ZeroTableNames())

	create, err := fs.ReadFile(dedup.Migrations(), "00001_processed_event.sql")
	require.NoError(t, err)
	assert.Contains(t, string(create), "CREATE TABLE IF NOT EXISTS processed_event (")
	assert.Contains(t, string(create), "DROP TABLE IF EXISTS processed_event;")
	agg, err := fs.ReadFile(dedup.Migrations(), "00004_aggregate_version.sql")
	require.NoError(t, err)
	assert.Contains(t, string(agg), "CREATE TABLE IF NOT EXISTS aggregate_version (")
	p, err := dedup.NewTableNames("p_")
	require.NoError(t, err)
	prefixed, err := dedup.MigrationsFor(p)
	require.NoError(t, err)
	for _, fsys := range []fs.FS{dedup.Migrations(), prefixed} {
		files, err := fs.Glob(fsys, "*.sql")
		require.NoError(t, err)
		require.Len(t, files, 5)
		for _, f := range files {
			text, err := fs.ReadFile(fsys, f)
			require.NoError(t, err)
			assert.NotContains(t, string(text), "{{", f)
		}
	}
	lease, err := fs.ReadFile(prefixed, "00005_event_lease.sql")
	require.NoError(t, err)
	assert.Contains(t, string(lease), "CREATE TABLE IF NOT EXISTS p_event_lease (", "the lease table follows the prefix")
	alter, err := fs.ReadFile(prefixed, "00003_purge_index.sql")
	require.NoError(t, err)
	assert.Contains(t, string(alter), "ALTER TABLE p_processed_event\n")

	db := testenv.MySQL(t)
	sum := sha256.Sum256([]byte("inventory"))
	j, err := dedup.NewJanitor(db, dedup.JanitorConfig{Scope: "inventory", Retention: 200 * time.Hour})
	require.NoError(t, err)
	assert.Equal(t, "rmqguard-dedup-janitor:"+hex.EncodeToString(sum[:16]), j.LockName())
	jp, err := dedup.NewJanitor(db, dedup.JanitorConfig{Scope: "inventory", Retention: 200 * time.Hour, TablePrefix: "p_"})
	require.NoError(t, err)
	assert.NotEqual(t, j.LockName(), jp.LockName())
	assert.LessOrEqual(t, len(jp.LockName()), 64)
}

// CheckSchema with a prefix checks the prefixed table and names it, with the fix that names
// the option.
func TestTablePrefix_CheckSchemaNamesThePrefixedTable(t *testing.T) {
	db := scratchDB(t)
	err := dedup.CheckSchema(context.Background(), db, dedup.WithTablePrefix("ops_"))
	require.ErrorIs(t, err, dedup.ErrSchema)
	assert.Contains(t, err.Error(), `ops_processed_event: the table is missing from the current database; fix: run dedup.Migrate with WithTablePrefix("ops_")`)
	_, err = dedup.Migrate(context.Background(), db.DB, dedup.WithTablePrefix("ops_"))
	require.NoError(t, err)
	require.NoError(t, dedup.CheckSchema(context.Background(), db, dedup.WithTablePrefix("ops_")))
}
