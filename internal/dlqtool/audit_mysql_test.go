package dlqtool_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// TestMySQLAudit_S5_ClaimBeforeSendIsExclusive runs the audit on MariaDB: of 8 concurrent claims of one
// letter exactly one wins; a finished row reads back; a re-claim takes over only the row it looked up.
func TestMySQLAudit_S5_ClaimBeforeSendIsExclusive(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	_, err := dlq.Migrate(ctx, db.DB)
	require.NoError(t, err)
	audit, err := dlqtool.NewMySQLAudit(db)
	require.NoError(t, err)
	group := testenv.Unique("audit")

	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := dlqtool.AuditRecord{Group: group, StoreID: "S-1", ReplayID: "R-" + string(rune('a'+i)), EventID: "e-1",
				OriginTopic: "ORDER", TargetTopic: "ORDER", Status: dlqtool.AuditSending, ReplayedBy: "op"}
			won, err := audit.Claim(ctx, rec, nil)
			assert.NoError(t, err)
			if won {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int32(1), wins.Load(), "one claim wins")

	row, found, err := audit.Lookup(ctx, group, "S-1")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, dlqtool.AuditSending, row.Status)
	assert.False(t, row.ReplayedAt.IsZero())
	row.Status, row.SentMsgID = dlqtool.AuditSent, "SENT-1"
	require.NoError(t, audit.Finish(ctx, row))
	sent, _, err := audit.Lookup(ctx, group, "S-1")
	require.NoError(t, err)
	assert.Equal(t, dlqtool.AuditSent, sent.Status)
	assert.Equal(t, "SENT-1", sent.SentMsgID)

	// A re-claim against a stale look-up (status sending, now sent) loses; against the current row it wins.
	stale := row
	stale.Status = dlqtool.AuditSending
	won, err := audit.Claim(ctx, dlqtool.AuditRecord{Group: group, StoreID: "S-1", ReplayID: "R-force", Status: dlqtool.AuditSending}, &stale)
	require.NoError(t, err)
	assert.False(t, won)
	won, err = audit.Claim(ctx, dlqtool.AuditRecord{Group: group, StoreID: "S-1", ReplayID: "R-force", Status: dlqtool.AuditSending}, &sent)
	require.NoError(t, err)
	assert.True(t, won)
	assert.Error(t, audit.Finish(ctx, row), "the earlier run no longer holds the row")

	_, found, err = audit.Lookup(ctx, group, "S-none")
	require.NoError(t, err)
	assert.False(t, found)
}

// TestMySQLProcessed_S5_ReadsTheDedupScope checks the processed check against a real processed_event row.
func TestMySQLProcessed_S5_ReadsTheDedupScope(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	scope, event := testenv.Unique("scope"), testenv.Unique("ev")
	_, err := db.ExecContext(ctx, `INSERT INTO processed_event (consumer_group, event_id, topic, msg_id, consumed_at, result_status)
		VALUES (?, ?, 'ORDER', 'm', UTC_TIMESTAMP(6), 'processed')`, scope, event)
	require.NoError(t, err)
	p, err := dlqtool.NewMySQLProcessed(db)
	require.NoError(t, err)
	done, err := p.Processed(ctx, scope, event)
	require.NoError(t, err)
	assert.True(t, done)
	done, err = p.Processed(ctx, scope+"-other", event)
	require.NoError(t, err)
	assert.False(t, done, "another scope has not processed it")
}

// F42: the status of many letters (a DLQ census every minute, `dlq list`) is read from MySQL in a few round
// trips, not two per letter, and is the status a lookup per letter gives: audit row (sent, failed or none)
// and processed check, by group and scope; a letter without event ID is not processed.
func TestStatuses_OnMySQLReadManyLettersInAFewRoundTrips(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	_, err := dlq.Migrate(ctx, db.DB)
	require.NoError(t, err)
	group, scope := testenv.Unique("status-many"), testenv.Unique("scope")
	const n = 1200
	letters := make([]dlqtool.Letter, n)
	for i := range letters {
		letters[i] = dlqtool.Letter{StoreID: fmt.Sprintf("S-%d", i), EventID: fmt.Sprintf("%s-e%d", group, i)}
		switch {
		case i%5 == 4:
			letters[i].EventID = ""
		case i%4 == 0:
			_, err := db.ExecContext(ctx, `INSERT INTO processed_event (consumer_group, event_id, topic, msg_id, consumed_at, result_status)
				VALUES (?, ?, 'ORDER', 'm', UTC_TIMESTAMP(6), 'processed')`, scope, letters[i].EventID)
			require.NoError(t, err)
		}
		if i%3 == 0 {
			status := dlqtool.AuditSent
			if i%2 == 0 {
				status = dlqtool.AuditFailed
			}
			_, err := db.ExecContext(ctx, `INSERT INTO dlq_replay (consumer_group, dlq_store_id, replay_id, status, replayed_at, replayed_by)
				VALUES (?, ?, 'R-1', ?, UTC_TIMESTAMP(6), 'op')`, group, letters[i].StoreID, string(status))
			require.NoError(t, err)
		}
	}
	// Another group's row and another scope's event: not this group's status.
	_, err = db.ExecContext(ctx, `INSERT INTO dlq_replay (consumer_group, dlq_store_id, replay_id, status, replayed_at)
		VALUES (?, 'S-1', 'R-x', 'sent', UTC_TIMESTAMP(6))`, group+"-other")
	require.NoError(t, err)

	one, err := sqlx.Open("mysql", testenv.MySQLDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = one.Close() })
	one.SetMaxOpenConns(1) // every statement on one connection, whose counter we read
	questions := func() int {
		var name string
		var v int
		require.NoError(t, one.QueryRowxContext(ctx, "SHOW SESSION STATUS LIKE 'Questions'").Scan(&name, &v))
		return v
	}
	audit, err := dlqtool.NewMySQLAudit(one)
	require.NoError(t, err)
	processed, err := dlqtool.NewMySQLProcessed(one)
	require.NoError(t, err)
	opts := dlqtool.StatusOptions{Group: group, Scope: scope, Audit: audit, Processed: processed}

	before := questions()
	got, err := dlqtool.Statuses(ctx, letters, opts)
	require.NoError(t, err)
	rounds := questions() - before - 1
	assert.LessOrEqual(t, rounds, 12, "statements for %d letters", n)

	// A lookup per letter (the interfaces alone) gives the same statuses.
	opts.Audit, opts.Processed = struct{ dlqtool.Audit }{audit}, struct{ dlqtool.ProcessedChecker }{processed}
	want, err := dlqtool.Statuses(ctx, letters, opts)
	require.NoError(t, err)
	require.Equal(t, want, got)
	var sent, failed, done int
	for _, s := range got {
		switch {
		case s.Replay != nil && s.Replay.Status == dlqtool.AuditSent:
			sent++
		case s.Replay != nil && s.Replay.Status == dlqtool.AuditFailed:
			failed++
		}
		if s.Processed {
			done++
		}
	}
	assert.Equal(t, []int{200, 200, 240}, []int{sent, failed, done})
}

// An audit table of the schema's first migration (a database where no replay ran since the upgrade: the
// reading commands do not migrate) reads as before, with no letter superseded; dlq.Migrate then adds the
// edit columns and keeps its rows, and an edit claim records both bodies.
func TestMySQLAudit_ATableBeforeTheEditMigrationReadsAndUpgradesKeepingItsRows(t *testing.T) {
	base := testenv.MySQL(t)
	ctx := context.Background()
	name := strings.ReplaceAll(testenv.Unique("rmqguard_scratch"), "-", "_")
	_, err := base.Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = base.Exec("DROP DATABASE IF EXISTS " + name) })
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	require.NoError(t, err)
	cfg.DBName = name
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	first, err := os.ReadFile("../../dlq/migrations/00001_dlq_replay.sql")
	require.NoError(t, err)
	up, _, ok := strings.Cut(string(first), "-- +goose Down")
	require.True(t, ok)
	_, err = db.Exec(up)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO dlq_replay (consumer_group, dlq_store_id, replay_id, event_id, sent_msg_id, status, replayed_at, replayed_by)
		VALUES ('g', 'S-1', 'R-1', 'e-1', 'M-1', 'sent', UTC_TIMESTAMP(6), 'alice')`)
	require.NoError(t, err)

	audit, err := dlqtool.NewMySQLAudit(db)
	require.NoError(t, err)
	before, found, err := audit.Lookup(ctx, "g", "S-1")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, dlqtool.AuditSent, before.Status)
	assert.False(t, before.Superseded())
	processed := fakeProcessed{}
	st, err := dlqtool.Statuses(ctx, []dlqtool.Letter{{StoreID: "S-1", EventID: "e-1"}}, dlqtool.StatusOptions{Group: "g", Audit: audit, Processed: processed})
	require.NoError(t, err, "the bulk read too")
	require.NotNil(t, st[0].Replay)
	assert.Equal(t, before, *st[0].Replay)

	applied, err := dlq.Migrate(ctx, db.DB)
	require.NoError(t, err)
	assert.Contains(t, applied, "00002_dlq_replay_edit.sql")
	after, _, err := audit.Lookup(ctx, "g", "S-1")
	require.NoError(t, err)
	assert.Equal(t, before, after, "an existing row reads the same after the migration")

	edit := dlqtool.AuditRecord{Group: "g", StoreID: "S-2", ReplayID: "R-2", EventID: "e-2", Status: dlqtool.AuditSending,
		ReplayedBy: "bob", EditedBy: "bob", OriginalBody: []byte("old"), EditedBody: []byte("new")}
	won, err := audit.Claim(ctx, edit, nil)
	require.NoError(t, err)
	require.True(t, won)
	got, _, err := audit.Lookup(ctx, "g", "S-2")
	require.NoError(t, err)
	assert.True(t, got.Superseded())
	assert.Equal(t, []byte("old"), got.OriginalBody)
	assert.Equal(t, []byte("new"), got.EditedBody)
	assert.WithinDuration(t, got.ReplayedAt, got.EditedAt, time.Second)

	// A plain replay never takes the edited row over, even against the row it looked up.
	won, err = audit.Claim(ctx, dlqtool.AuditRecord{Group: "g", StoreID: "S-2", ReplayID: "R-3", Status: dlqtool.AuditSending, ReplayedBy: "carol"}, &got)
	require.NoError(t, err)
	assert.False(t, won)
}
