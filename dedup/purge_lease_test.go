package dedup_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// insertLease inserts a lease row of scope for event id whose lease ends hours from now (negative: ago) on
// the database's clock, in table (event_lease or a prefixed one).
func insertLease(t *testing.T, db *sqlx.DB, table, scope, id string, hours int) {
	t.Helper()
	_, err := db.Exec(`INSERT INTO `+table+` (consumer_group, event_id, claim_token, msg_id, claimed_at, lease_until)
		VALUES (?, ?, REPEAT('a', 32), 'm', UTC_TIMESTAMP(6) + INTERVAL ? HOUR, UTC_TIMESTAMP(6) + INTERVAL ? HOUR)`,
		scope, id, hours, hours)
	require.NoError(t, err)
}

func leaseIDs(t *testing.T, db *sqlx.DB, table, scope string) []string {
	t.Helper()
	var ids []string
	require.NoError(t, db.Select(&ids, `SELECT event_id FROM `+table+` WHERE consumer_group = ? ORDER BY event_id`, scope))
	return ids
}

// F35, F22: lease rows left by runs that died (a lease never ended) are purged with the processed_event rows
// of the same window: those of the scope whose lease ended before the cutoff, in bounded batches; a lease
// that ended inside the window (its message may still come back and must be told it takes over), a live
// one and another scope's stay. A dry run counts them; a schema without the lease table purges as before.
func TestPurge_LeaseRowsThatEndedBeforeTheWindowArePurged(t *testing.T) {
	db := testenv.MySQL(t)
	scope, other := testenv.Unique("purge"), testenv.Unique("purge")
	t.Cleanup(func() {
		deleteScope(db, scope)
		_, _ = db.Exec(`DELETE FROM event_lease WHERE consumer_group IN (?, ?)`, scope, other)
	})
	insertOld(t, db, scope, scope, 10, 200)
	for i, id := range []string{"dead-1", "dead-2", "dead-3"} {
		insertLease(t, db, "event_lease", scope, id, -150-i)
	}
	insertLease(t, db, "event_lease", scope, "recent", -1)
	insertLease(t, db, "event_lease", scope, "live", 1)
	insertLease(t, db, "event_lease", other, "dead-1", -200)
	cfg := dedupsql.Config{Scope: scope, OlderThan: 144 * time.Hour, BatchSize: 2}

	dry := cfg
	dry.DryRun = true
	res, err := dedupsql.Purge(context.Background(), db, dry, nil)
	require.NoError(t, err)
	assert.EqualValues(t, 10, res.Rows)
	assert.EqualValues(t, 3, res.Leases)
	assert.Equal(t, 5+2, res.Batches, "10 rows and 3 leases by 2")
	assert.Len(t, leaseIDs(t, db, "event_lease", scope), 5, "a dry run deletes nothing")

	res, err = dedupsql.Purge(context.Background(), db, cfg, nil)
	require.NoError(t, err)
	assert.EqualValues(t, 10, res.Rows)
	assert.EqualValues(t, 3, res.Leases)
	assert.Equal(t, 5+2, res.Batches)
	assert.Equal(t, []string{"live", "recent"}, leaseIDs(t, db, "event_lease", scope))
	assert.Equal(t, []string{"dead-1"}, leaseIDs(t, db, "event_lease", other), "another scope's lease stays")

	pre := scratchDB(t)
	_, err = dedup.Migrate(context.Background(), pre.DB, dedup.WithTablePrefix("pay_"))
	require.NoError(t, err)
	_, err = pre.Exec(`DROP TABLE pay_event_lease`)
	require.NoError(t, err)
	res, err = dedupsql.Purge(context.Background(), pre, dedupsql.Config{Scope: scope, OlderThan: 144 * time.Hour, TablePrefix: "pay_"}, nil)
	require.NoError(t, err, "a schema before the lease table")
	assert.Zero(t, res.Leases)
}
