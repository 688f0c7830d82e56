package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// orderMsg is a delivered OrderCreated message with event ID id.
func orderMsg(id string) *primitive.MessageExt {
	m := &primitive.MessageExt{Message: *orderMessage("T", id, 0), MsgId: "M-" + id}
	return m
}

func TestBenchE2E_MultirowClaimHasOneRowPerEventInEventIDOrder(t *testing.T) {
	q, args, ids := multirowClaim("d", "g", "tok", []*primitive.MessageExt{orderMsg("e-3"), orderMsg("e-1"), orderMsg("e-3"), orderMsg("e-2")})
	require.Equal(t, []string{"e-1", "e-2", "e-3"}, ids, "event ID order, a repeated event once")
	require.Equal(t, 3, strings.Count(q, "UTC_TIMESTAMP(6), 'SUCCESS', ?)"))
	require.True(t, strings.HasPrefix(q, "INSERT IGNORE INTO d "), q)
	require.Len(t, args, 7*3)
	require.Equal(t, strings.Count(q, "?"), len(args))
	require.Equal(t, []any{"g", "e-1", "OrderCreated", "O-e-1", "T", "M-e-1", "tok"}, args[:7])

	q, args = ownedQuery("d", "g", "tok", ids)
	require.Equal(t, strings.Count(q, "?"), len(args))
	require.Equal(t, []any{"tok", "g", "e-1", "e-2", "e-3"}, args)

	q, args = businessRows("b", []string{"e-1", "e-2"})
	require.Equal(t, "INSERT INTO b"+businessColumns+businessRow+", "+businessRow, q)
	require.Equal(t, []any{"O-e-1", "e-1", 1000, "10.50", "O-e-2", "e-2", 1000, "10.50"}, args)
}

// The hand-written multi-row batch tells duplicates apart without a failed statement: events committed by
// an earlier callback, and an event twice in one callback, get no second business row.
func TestBenchE2E_MultirowTxWritesEachEventsBusinessRowOnce(t *testing.T) {
	db := testenv.MySQL(t)
	for _, w := range []struct {
		name  string
		write businessWriter
	}{{"multi-row", insertBusinessRows}, {"row by row", insertBusinessRowsOneByOne}} {
		t.Run(w.name, func(t *testing.T) { multirowWritesEachEventOnce(t, db, w.write) })
	}
}

func multirowWritesEachEventOnce(t *testing.T, db *sqlx.DB, write businessWriter) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := &environment{db: db, cleanup: &cleanup{}, log: io.Discard}
	t.Cleanup(func() { env.cleanup.run(env, io.Discard) })
	run := testenv.Unique("be2e-mr")
	dedupTable, bizTable := tableName(run, "dedup"), tableName(run, "orders")
	require.NoError(t, createDedupTable(ctx, env, dedupTable))
	require.NoError(t, createBusinessTable(ctx, env, bizTable))

	callbacks := [][]string{
		{"e-2", "e-1", "e-2", "e-3"}, // e-2 twice
		{"e-3", "e-4", "e-1", "e-5"}, // e-1 and e-3 committed already
		{"e-4", "e-5"},               // all committed already
	}
	for _, ids := range callbacks {
		msgs := make([]*primitive.MessageExt, len(ids))
		for i, id := range ids {
			msgs[i] = orderMsg(id)
		}
		require.NoError(t, multirowTx(ctx, db, dedupTable, bizTable, run, msgs, write))
	}
	var got []string
	require.NoError(t, db.SelectContext(ctx, &got, `SELECT event_id FROM `+bizTable+` ORDER BY event_id`))
	require.Equal(t, []string{"e-1", "e-2", "e-3", "e-4", "e-5"}, got, "one business row per event")
	var claimed int
	require.NoError(t, db.GetContext(ctx, &claimed, `SELECT COUNT(*) FROM `+dedupTable+` WHERE consumer_group = ? AND CHAR_LENGTH(claim_token) = 32`, run))
	require.Equal(t, 5, claimed, "each dedup row carries its callback's token")
}
