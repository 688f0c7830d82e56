package outboxadmin_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/outboxadmin"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/outbox"
)

// table is an outbox table of its own, on a prefix of its own, in the shared database.
type table struct {
	db     *sqlx.DB
	prefix string
	t      string
}

func newTable(t *testing.T) *table {
	t.Helper()
	db := testenv.MySQL(t)
	prefix := "oba" + strings.ReplaceAll(strings.TrimPrefix(testenv.Unique("oba"), "oba-"), "-", "_") + "_"
	err := dedupsql.CheckPrefix(prefix)
	require.NoError(t, err)
	_, err = outbox.Migrate(context.Background(), db.DB, prefix)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, tb := range []string{prefix + outboxsql.Table, prefix + outboxsql.VersionTable} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tb)
		}
	})
	return &table{db: db, prefix: prefix, t: prefix + outboxsql.Table}
}

// add inserts a committed pending message row (as Send after COMMIT) and returns its id.
func (tb *table) add(t *testing.T, name, key string) int64 {
	t.Helper()
	res, err := tb.db.Exec(`INSERT INTO `+tb.t+` (kind, event_id, source_event_id, scope, name, sharding_key, topic, tag, msg_keys,
	   properties, body, status, attempts, next_attempt_at, created_at)
	 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
		outboxsql.KindMessage, "scope/ev/"+name, "ev", "scope", name, key, "T", "", "", nil, []byte(name))
	require.NoError(t, err)
	id, err := res.LastInsertId()
	require.NoError(t, err)
	return id
}

// Purge deletes the sent rows past the window, in id order, up to the first sent row still inside it;
// pending and parked rows stay, whatever their age.
func TestPurge_DeletesSentRowsPastTheWindowUpToTheFirstYoungOne(t *testing.T) {
	tb := newTable(t)
	rows := []struct{ status, sentAgo string }{
		{outboxsql.StatusSent, "240 HOUR"}, {outboxsql.StatusSent, "240 HOUR"}, {outboxsql.StatusPending, ""}, {outboxsql.StatusParked, ""},
		{outboxsql.StatusSent, "1 HOUR"}, {outboxsql.StatusSent, "240 HOUR"},
	}
	var ids []int64
	for i, r := range rows {
		id := tb.add(t, "m-"+strconv.Itoa(i), "k-"+strconv.Itoa(i))
		ids = append(ids, id)
		if r.sentAgo != "" {
			_, err := tb.db.Exec("UPDATE "+tb.t+" SET status = 'sent', sent_at = UTC_TIMESTAMP(6) - INTERVAL "+r.sentAgo+" WHERE id = ?", id)
			require.NoError(t, err)
		} else {
			_, err := tb.db.Exec("UPDATE "+tb.t+" SET status = ?, created_at = UTC_TIMESTAMP(6) - INTERVAL 400 HOUR WHERE id = ?", r.status, id)
			require.NoError(t, err)
		}
	}
	n, err := outboxadmin.Purge(context.Background(), tb.db, tb.prefix, 24*time.Hour, 1)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	var left []int64
	require.NoError(t, tb.db.Select(&left, "SELECT id FROM "+tb.t+" ORDER BY id"))
	require.Equal(t, ids[2:], left, "the two old sent rows before the young one are deleted; the one after it waits for it")
	n, err = outboxadmin.Purge(context.Background(), tb.db, tb.prefix, 30*time.Minute, 1000)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "with a shorter window the young row and the one after it go too")
}

// ParkedByScope counts only parked rows, per scope and kind (F33's "listed", as the console shows it).
func TestParkedByScope_CountsParkedRowsPerScopeAndKind(t *testing.T) {
	tb := newTable(t)
	for i, r := range []struct{ kind, scope, status string }{
		{outboxsql.KindMessage, "inventory", "parked"}, {outboxsql.KindMessage, "inventory", "parked"},
		{outboxsql.KindEffect, "inventory", "parked"}, {outboxsql.KindMessage, "inventory", "pending"},
		{outboxsql.KindMessage, "billing", "sent"}, {outboxsql.KindEffect, "billing", "parked"},
	} {
		_, err := tb.db.Exec(`INSERT INTO `+tb.t+` (kind, event_id, source_event_id, scope, name, sharding_key, body, status,
		   next_attempt_at, created_at) VALUES (?, ?, 'ev', ?, 'n', 'k', 'b', ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
			r.kind, "ev-"+strconv.Itoa(i), r.scope, r.status)
		require.NoError(t, err)
	}
	got, err := outboxadmin.ParkedByScope(context.Background(), tb.db, tb.prefix)
	require.NoError(t, err)
	require.Equal(t, map[string]outboxadmin.Parked{"inventory": {Messages: 2, Effects: 1}, "billing": {Effects: 1}}, got)
}
