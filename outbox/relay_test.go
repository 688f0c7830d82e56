package outbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/outbox"
)

// The due head rows of one round (one per sharding key) are run together, up to 16 at once, each once,
// and each row's sent_at is when it finished (not before its transaction's insert, not at the end of the
// round).
func TestRelay_HeadsOfDistinctKeysRunConcurrentlyEachOnceWithTheirOwnSentAt(t *testing.T) {
	const events, busy = 40, 150 * time.Millisecond
	var mu sync.Mutex
	running, most := 0, 0
	calls := map[string]int{}
	e, ob := newEffects(t, func(s *dedup.Store) *outbox.Outbox {
		ob, err := outbox.New(s, outbox.Config{Effects: map[string]outbox.EffectFunc{"notify": func(ctx context.Context, ef outbox.Effect) error {
			mu.Lock()
			running++
			most = max(most, running)
			calls[ef.IdempotencyKey]++
			mu.Unlock()
			time.Sleep(busy)
			mu.Lock()
			running--
			mu.Unlock()
			return nil
		}}})
		require.NoError(t, err)
		return ob
	})
	for i := range events {
		e.deliver(t, fmt.Sprintf("order-%d-paid", i), "{}")
	}
	run(t, ob)
	require.Eventually(t, func() bool { return e.count(t, outboxsql.StatusSent) == events }, 20*time.Second, 50*time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, calls, events)
	for k, n := range calls {
		require.Equal(t, 1, n, "runs of %s", k)
	}
	require.Greater(t, most, 1, "heads of distinct keys run together")
	require.LessOrEqual(t, most, 16, "at most 16 at once")
	// sent_at - created_at: at least the effect's own run, and well below a serial round of 40 (6 s).
	var spans []int64
	require.NoError(t, e.db.Select(&spans, "SELECT TIMESTAMPDIFF(MICROSECOND, created_at, sent_at) FROM "+
		e.prefix+outboxsql.Table+" ORDER BY id"))
	require.Len(t, spans, events)
	for i, us := range spans {
		require.GreaterOrEqual(t, time.Duration(us)*time.Microsecond, busy, "row %d", i)
	}
	// One round claims all 40 (it claims up to 256), run in waves of 16: the sent_at of its rows spread over
	// the waves; a sent_at taken at the end of the round would be the same for all.
	var spread int64
	require.NoError(t, e.db.Get(&spread, "SELECT TIMESTAMPDIFF(MICROSECOND, MIN(sent_at), MAX(sent_at)) FROM "+
		e.prefix+outboxsql.Table))
	require.GreaterOrEqual(t, time.Duration(spread)*time.Microsecond, busy, "each row's sent_at is its own end")
}
