package dlqtool_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// countingSender counts the sends the broker stored.
type countingSender struct {
	inner rmq.Sender
	n     atomic.Int32
}

func (s *countingSender) SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	res, err := s.inner.SendSync(ctx, msgs...)
	if err == nil && res.Status == primitive.SendOK {
		s.n.Add(1)
	}
	return res, err
}

// S5 for edits, on the real broker and MariaDB: two edited replays of one letter at once send one message
// (the audit's primary key settles the claim); the row keeps both bodies and the editor, the letter is
// superseded, and a replay of it afterwards sends nothing and says superseded.
func TestReplayEdited_S5_TwoEditsAtOnceOnMySQLSendOneMessage(t *testing.T) {
	w := newDLQWorld(t, 6, 1)
	original := []byte(`{"id":"e-1","sku":"no-such-sku"}`)
	w.publish(letter{eventID: "e-1", eventType: "OrderCreated", reason: "unknown SKU", body: original})
	letters := w.scan(dlqtool.ScanOptions{}).Letters
	require.Len(t, letters, 1)
	require.NoError(t, rmq.EnsureTopic(w.ctx, w.ns, w.broker, rmq.RetryTopic(w.group), 1))

	db := testenv.MySQL(t)
	_, err := dlq.Migrate(w.ctx, db.DB)
	require.NoError(t, err)
	audit, err := dlqtool.NewMySQLAudit(db)
	require.NoError(t, err)
	processed, err := dlqtool.NewMySQLProcessed(db)
	require.NoError(t, err)
	prod, err := rmq.StartProducer(w.ns, testenv.Unique("edit-prod"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = prod.Shutdown() })
	sender := &countingSender{inner: prod}
	opts := func(operator string) dlqtool.ReplayOptions {
		return dlqtool.ReplayOptions{Group: w.group, Operator: operator, Sender: sender, Audit: audit, Processed: processed}
	}

	bodies := [][]byte{[]byte(`{"id":"e-1","sku":"sku-a"}`), []byte(`{"id":"e-1","sku":"sku-b"}`)}
	results := make([]dlqtool.LetterResult, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := dlqtool.ReplayEdited(w.ctx, letters[0], bodies[i], opts("op-"+string(rune('a'+i))))
			assert.NoError(t, err)
			results[i] = res
		}()
	}
	wg.Wait()
	won := -1
	for i, res := range results {
		switch res.Outcome {
		case dlqtool.ReplaySent:
			require.Equal(t, -1, won, "only one edit sends")
			won = i
		default:
			assert.Equal(t, dlqtool.ReplaySkippedSuperseded, res.Outcome, "the other edit: %+v", res)
		}
	}
	require.NotEqual(t, -1, won, "one edit sends: %+v", results)
	assert.Equal(t, int32(1), sender.n.Load(), "one message reached the broker")

	row, found, err := audit.Lookup(w.ctx, w.group, letters[0].StoreID)
	require.NoError(t, err)
	require.True(t, found)
	assert.True(t, row.Superseded())
	assert.Equal(t, dlqtool.AuditSent, row.Status)
	assert.Equal(t, "op-"+string(rune('a'+won)), row.EditedBy)
	assert.Equal(t, original, row.OriginalBody)
	assert.Equal(t, bodies[won], row.EditedBody)
	assert.False(t, row.EditedAt.IsZero())
	assert.Equal(t, results[won].SentMsgID, row.SentMsgID)

	rep, err := dlqtool.Replay(w.ctx, letters, opts("op-c"))
	require.NoError(t, err)
	assert.Equal(t, dlqtool.ReplaySummary{Selected: 1, SkippedSuperseded: 1}, rep.Summary)
	assert.Equal(t, int32(1), sender.n.Load(), "the original is not replayed after its edit")
	st, err := dlqtool.Statuses(w.ctx, letters, dlqtool.StatusOptions{Group: w.group, Audit: audit, Processed: processed})
	require.NoError(t, err)
	require.NotNil(t, st[0].Replay)
	assert.True(t, st[0].Replay.Superseded(), "the status read in bulk says superseded")
	assert.False(t, st[0].Waiting(), "a letter whose edited copy was sent waits for nobody")
}
