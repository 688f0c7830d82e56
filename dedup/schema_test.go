package dedup_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// scratchDB creates a database of its own (rmqguard_scratch_…, which the test user may create and drop),
// opens it, and drops it when the test ends.
func scratchDB(t *testing.T) *sqlx.DB {
	t.Helper()
	base := businessDB(t)
	name := strings.ReplaceAll(testenv.Unique("rmqguard_scratch"), "-", "_")
	_, err := base.Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = base.Exec("DROP DATABASE IF EXISTS " + name) })
	cfg, err := mysql.ParseDSN(testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN))
	require.NoError(t, err)
	cfg.DBName = name
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// createProcessedEvent creates processed_event as migrations 00001-00003 do, but with the given key
// collation and primary key.
func createProcessedEvent(t *testing.T, db *sqlx.DB, collation, primaryKey string) {
	t.Helper()
	_, err := db.Exec(`CREATE TABLE processed_event (
		consumer_group VARCHAR(255) NOT NULL, event_id VARCHAR(128) NOT NULL,
		event_type VARCHAR(64) NOT NULL DEFAULT '', aggregate_id VARCHAR(128) NOT NULL DEFAULT '',
		topic VARCHAR(255) NOT NULL, msg_id VARCHAR(64) NOT NULL, consumed_at DATETIME(6) NOT NULL,
		result_status VARCHAR(20) NOT NULL, claim_token CHAR(32) NOT NULL DEFAULT '',
		PRIMARY KEY ` + primaryKey + `) DEFAULT CHARSET=utf8mb4 COLLATE=` + collation)
	require.NoError(t, err)
}

// F23: processed_event pre-created with a _ci collation is refused, with the ALTER TABLE that fixes it;
// after that ALTER, `Ord-7aB` and `ord-7ab` are two events with two effects.
func TestF23_CaseInsensitiveCollationIsRefusedAndTheFixMakesTwoEvents(t *testing.T) {
	db := scratchDB(t)
	createProcessedEvent(t, db, "utf8mb4_general_ci", "(consumer_group, event_id)")

	_, err := dedup.NewStore(db)
	require.ErrorIs(t, err, dedup.ErrSchema)
	assert.Contains(t, err.Error(), "column consumer_group has collation utf8mb4_general_ci")
	assert.Contains(t, err.Error(), "column event_id has collation utf8mb4_general_ci")
	fix := "ALTER TABLE processed_event MODIFY consumer_group varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, " +
		"MODIFY event_id varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;"
	require.Contains(t, err.Error(), "fix: "+fix)

	_, err = db.Exec(fix)
	require.NoError(t, err, "the statement the error gives fixes the table")
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE effect (event_id VARCHAR(128) NOT NULL) COLLATE utf8mb4_bin`) // no key: a double apply shows
	require.NoError(t, err)

	f := newFixture(t)
	f.db, f.store = db, store
	h := f.chain(t, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO effect (event_id) VALUES (?)`, d.EventID)
		return consumer.Processed(), err
	})
	for _, id := range []string{"Ord-7aB", "ord-7ab", "Ord-7aB", "ord-7ab"} {
		_, err := f.handle(h, f.orderMsg(t, id, id))
		require.NoError(t, err)
	}
	var effects []string
	require.NoError(t, db.Select(&effects, `SELECT event_id FROM effect ORDER BY event_id`))
	assert.Equal(t, []string{"Ord-7aB", "ord-7ab"}, effects, "two events, two effects, each once")
}

// F23: a missing table, a missing column and a wrong primary key are refused too, each with its fix.
func TestF23_MissingTableAndWrongPrimaryKeyAreRefused(t *testing.T) {
	db := scratchDB(t)
	_, err := dedup.NewStore(db)
	require.ErrorIs(t, err, dedup.ErrSchema)
	assert.Contains(t, err.Error(), "fix: run dedup.Migrate")

	createProcessedEvent(t, db, "utf8mb4_bin", "(event_id)")
	_, err = db.Exec(`ALTER TABLE processed_event DROP COLUMN claim_token`)
	require.NoError(t, err)
	_, err = dedup.NewStore(db)
	require.ErrorIs(t, err, dedup.ErrSchema)
	assert.Contains(t, err.Error(), "column claim_token is missing")
	assert.Contains(t, err.Error(), "primary key is (event_id), want (consumer_group, event_id)")
	assert.Contains(t, err.Error(), "ALTER TABLE processed_event DROP PRIMARY KEY, ADD PRIMARY KEY (consumer_group, event_id);")

	_, err = db.Exec(`DROP TABLE processed_event`)
	require.NoError(t, err)
	_, err = dedup.Migrate(context.Background(), db.DB)
	require.NoError(t, err)
	_, err = dedup.NewStore(db)
	require.NoError(t, err, "the migrated schema passes")
}
