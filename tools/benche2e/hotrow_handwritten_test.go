package main

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// The hand-written hot-row batch applies each event once, duplicates of earlier callbacks and within a
// callback included, and its ledger and balances then reconcile as checkHot checks them.
func TestBenchE2E_HotrowHandwrittenBatchCreditsEachEventOnce(t *testing.T) {
	db := testenv.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := &environment{db: db, cleanup: &cleanup{}, log: io.Discard}
	t.Cleanup(func() { env.cleanup.run(env, io.Discard) })
	run := testenv.Unique("be2e-hh")
	dedupTable, ledger, balance := tableName(run, "dedup"), tableName(run, "ledger"), tableName(run, "balance")
	require.NoError(t, createDedupTable(ctx, env, dedupTable))
	require.NoError(t, createHotTables(ctx, env, ledger, balance))

	msg := func(i int) *primitive.MessageExt {
		id := fmt.Sprintf("%s-h-%d", run, i)
		return &primitive.MessageExt{Message: *hotMessage("T", id, i), MsgId: "M-" + id}
	}
	callbacks := [][]int{{3, 53, 1, 3}, {53, 2, 0}, {0, 1, 2, 3}} // 53 and 3 share acct-03; repeats
	for _, c := range callbacks {
		msgs := make([]*primitive.MessageExt, len(c))
		for i, n := range c {
			msgs[i] = msg(n)
		}
		write, err := hotWriter(msgs, balance)
		require.NoError(t, err)
		require.NoError(t, multirowTx(ctx, db, dedupTable, ledger, run, msgs, write))
	}
	// events 0..3 and 53: 0..3 are hotBalances(4), 53 adds 53%7+1 = 5 to acct-03
	require.Error(t, checkHot(ctx, db, ledger, balance, 4), "five events were credited, not four")
	var rows int
	require.NoError(t, db.GetContext(ctx, &rows, `SELECT COUNT(*) FROM `+ledger))
	require.Equal(t, 5, rows, "one ledger row per event")
	var acct03 int64
	require.NoError(t, db.GetContext(ctx, &acct03, `SELECT balance FROM `+balance+` WHERE account = 'acct-03'`))
	require.Equal(t, hotAmount(3)+hotAmount(53), acct03)
}
