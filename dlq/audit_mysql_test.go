package dlq_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// TestMySQLAudit_S5_ClaimBeforeSendIsExclusive runs the audit on MariaDB: of 8 concurrent claims of one
// letter exactly one wins; a finished row reads back; a re-claim takes over only the row it looked up.
func TestMySQLAudit_S5_ClaimBeforeSendIsExclusive(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	_, err := dedup.RunMigrations(ctx, db.DB, dlq.AuditMigrations(), dlq.AuditVersionTable)
	require.NoError(t, err)
	audit, err := dlq.NewMySQLAudit(db)
	require.NoError(t, err)
	group := testenv.Unique("audit")

	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := dlq.AuditRecord{Group: group, StoreID: "S-1", ReplayID: "R-" + string(rune('a'+i)), EventID: "e-1",
				OriginTopic: "ORDER", TargetTopic: "ORDER", Status: dlq.AuditSending, ReplayedBy: "op"}
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
	assert.Equal(t, dlq.AuditSending, row.Status)
	assert.False(t, row.ReplayedAt.IsZero())
	row.Status, row.SentMsgID = dlq.AuditSent, "SENT-1"
	require.NoError(t, audit.Finish(ctx, row))
	sent, _, err := audit.Lookup(ctx, group, "S-1")
	require.NoError(t, err)
	assert.Equal(t, dlq.AuditSent, sent.Status)
	assert.Equal(t, "SENT-1", sent.SentMsgID)

	// A re-claim against a stale look-up (status sending, now sent) loses; against the current row it wins.
	stale := row
	stale.Status = dlq.AuditSending
	won, err := audit.Claim(ctx, dlq.AuditRecord{Group: group, StoreID: "S-1", ReplayID: "R-force", Status: dlq.AuditSending}, &stale)
	require.NoError(t, err)
	assert.False(t, won)
	won, err = audit.Claim(ctx, dlq.AuditRecord{Group: group, StoreID: "S-1", ReplayID: "R-force", Status: dlq.AuditSending}, &sent)
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
	p, err := dlq.NewMySQLProcessed(db)
	require.NoError(t, err)
	done, err := p.Processed(ctx, scope, event)
	require.NoError(t, err)
	assert.True(t, done)
	done, err = p.Processed(ctx, scope+"-other", event)
	require.NoError(t, err)
	assert.False(t, done, "another scope has not processed it")
}
