package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
)

// The lost batches the benchmark reports are the consumer's own: a batch whose first pass loses its
// transaction to a deadlock (MySQL 1213 from a member's statement) is handled once more, and counted once,
// through the benchmark's chain and its consumer logger.
func TestBenchE2E_ABatchLostToADeadlockIsCountedOnce(t *testing.T) {
	db := testenv.MySQL(t)
	store, err := dedup.NewStore(db, dedup.WithTxDSN(testenv.MySQLDSN()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	group := testenv.Unique("be2e-lost")
	t.Cleanup(func() { _ = deleteScope(context.Background(), db, group) })
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	var calls atomic.Int32
	h, err := chain(store, m, options{}, dedup.Handle(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		if calls.Add(1) == 1 {
			return consumer.Outcome{}, &mysql.MySQLError{Number: mysqlerr.ErLockDeadlock, Message: "Deadlock found when trying to get lock"}
		}
		return consumer.Processed(), nil
	}))
	require.NoError(t, err)
	c := &consumerCounts{batch: 2}
	cb := testenv.NewCallback(t, consumer.Config{Group: group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}}, BatchSize: 2},
		h, consumer.WithLogger(c.logger()))

	var msgs []*primitive.MessageExt
	for i := range 2 {
		id := fmt.Sprintf("%s-%d", group, i)
		msg := &primitive.MessageExt{MsgId: id + "-msg", Message: primitive.Message{Topic: "ORDER", Body: []byte(`{}`)}}
		msg.WithProperty("EVENT_ID", id)
		msgs = append(msgs, msg)
	}
	require.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))
	require.EqualValues(t, 1, c.lost.Load(), "one lost batch")
	for _, msg := range msgs {
		dec := cb.Decisions(msg.MsgId)
		require.Len(t, dec, 1)
		require.Equal(t, consumer.KindProcessed, dec[0].Outcome.Kind, "handled once more: processed")
	}
}
