package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/outbox"
)

// A paid order, through the example's chain on MariaDB, leaves in its transaction one LoyaltyPointsCredited
// row and one notification row in the outbox (a late OrderPaid leaves none); the relay runs the
// notification against the receiver with the row's event ID as idempotency key; the loyalty group,
// delivered the credit twice (a redelivery, EVENT_ID as the relay sets it), applies it once.
func TestPaidOrder_LoyaltyAndNotificationOnceThroughTheOutbox(t *testing.T) {
	ctx := t.Context()
	db := shoptest.MySQL(t)
	require.NoError(t, shop.Migrate(ctx, db.DB))
	run := testenv.Unique("fu")
	prefix := "fu" + strings.NewReplacer("-", "", "_", "").Replace(strings.TrimPrefix(run, "fu-")) + "_"
	err := dedupsql.CheckPrefix(prefix)
	require.NoError(t, err)
	_, err = dedup.Migrate(ctx, db.DB, dedup.WithTablePrefix(prefix))
	require.NoError(t, err)
	_, err = outbox.Migrate(ctx, db.DB, prefix)
	require.NoError(t, err)
	obTable := prefix + outboxsql.Table
	t.Cleanup(func() {
		for _, tb := range append(dedupsql.Names(prefix), obTable, prefix+outboxsql.VersionTable) {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tb)
		}
	})
	store, err := dedup.NewStore(db, dedup.WithTablePrefix(prefix), dedup.WithTxDSN(testenv.MySQLDSN()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	receiver := httptest.NewServer(newReceiver())
	defer receiver.Close()
	ob, err := outbox.New(store, outbox.Config{PollInterval: 50 * time.Millisecond,
		Effects: map[string]outbox.EffectFunc{effectNotify: notifyEffect(receiver.Client(), receiver.URL+"/notify")}})
	require.NoError(t, err)
	s, err := shop.New(shop.WithFollowUps(outboxFollowUps{ob: ob, topic: "LOYALTY_TEST"}))
	require.NoError(t, err)
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	h, err := chain(s, store, nil, m, zap.NewNop(), runOptions{gapRetries: 1, gapDelayLevel: 1, handlerTimeout: 5 * time.Second})
	require.NoError(t, err)
	group, no, acct := run+"-cg", run+"-o1", run+"-acct"
	require.NoError(t, s.Apply(ctx, db, shop.Seed{Run: run, Stock: map[string]int64{run + "-sku": 10}, Accounts: map[string]int64{acct: 1000}}))
	deliver := func(group, topic, eventID, eventType, aggregate string, version int64, body any, props map[string]string) consumer.Kind {
		b, ok := body.([]byte)
		if !ok {
			b, err = json.Marshal(body)
			require.NoError(t, err)
		}
		ext := &primitive.MessageExt{Message: primitive.Message{Topic: topic, Body: b}, MsgId: testenv.Unique("msg")}
		ext.WithTag(eventType)
		ext.WithProperties(props)
		ext.WithProperty(shop.PropEventID, eventID)
		ext.WithProperty(shop.PropEventType, eventType)
		ext.WithProperty(shop.PropAggregateID, aggregate)
		if version > 0 {
			ext.WithProperty(shop.PropAggregateVersion, strconv.FormatInt(version, 10))
		}
		d := testenv.NewDelivery(group, ext)
		d.MaxAttempts = 3
		o, err := h.Handle(ctx, d)
		require.NoError(t, err)
		return o.Kind
	}
	require.Equal(t, consumer.KindProcessed, deliver(group, "T", no+"-created", shop.EventOrderCreated, no, 1,
		shop.OrderCreated{EventID: no + "-created", OrderNo: no, AccountID: acct, SkuID: run + "-sku", Quantity: 1, AmountCents: 250}, nil))
	require.Equal(t, consumer.KindProcessed, deliver(group, "T", no+"-paid", shop.EventOrderPaid, no, 2,
		shop.OrderPaid{EventID: no + "-paid", OrderNo: no, PaymentID: no + "-pay"}, nil))
	require.Equal(t, consumer.KindStale, deliver(group, "T", no+"-paid-late", shop.EventOrderPaid, no, 2,
		shop.OrderPaid{EventID: no + "-paid-late", OrderNo: no, PaymentID: no + "-pay"}, nil))

	var rows []struct {
		Kind       string         `db:"kind"`
		EventID    string         `db:"event_id"`
		Topic      string         `db:"topic"`
		Tag        string         `db:"tag"`
		Properties sql.NullString `db:"properties"`
		Body       []byte         `db:"body"`
	}
	require.NoError(t, db.Select(&rows, `SELECT kind, event_id, topic, tag, properties, body FROM `+obTable+` ORDER BY kind`))
	require.Len(t, rows, 2, "one message and one effect for the paid order, none for the late OrderPaid")
	eff, msg := rows[0], rows[1]
	require.Equal(t, outboxsql.KindEffect, eff.Kind)
	require.Equal(t, outboxsql.KindMessage, msg.Kind)
	assert.Equal(t, outboxsql.EventID(group, no+"-paid", effectNotify), eff.EventID)
	assert.Equal(t, outboxsql.EventID(group, no+"-paid", outboxLoyalty), msg.EventID)
	assert.Equal(t, "LOYALTY_TEST", msg.Topic)
	assert.Equal(t, shop.EventLoyaltyPointsCredited, msg.Tag)

	// The relay (no name servers: effects only) runs the notification.
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = ob.Run(rctx) }()
	require.Eventually(t, func() bool {
		var st string
		return db.Get(&st, `SELECT status FROM `+obTable+` WHERE kind = ?`, outboxsql.KindEffect) == nil && st == outboxsql.StatusSent
	}, 10*time.Second, 50*time.Millisecond)
	stop()
	<-done
	c, err := fetchReceiverCounts(ctx, strings.TrimPrefix(receiver.URL, "http://"))
	require.NoError(t, err)
	assert.Equal(t, map[string]int{eff.EventID: 1}, c.Applied)

	// The loyalty group gets the message twice, with the EVENT_ID the relay puts on it.
	var props map[string]string
	require.NoError(t, json.Unmarshal([]byte(msg.Properties.String), &props))
	lg := run + "-cg-loyalty"
	assert.Equal(t, consumer.KindProcessed, deliver(lg, msg.Topic, msg.EventID, msg.Tag, acct, 0, msg.Body, props))
	assert.Equal(t, consumer.KindDuplicate, deliver(lg, msg.Topic, msg.EventID, msg.Tag, acct, 0, msg.Body, props))
	l, err := shop.RunLoyalty(ctx, db, run+"-")
	require.NoError(t, err)
	assert.Equal(t, 1, l.Credits)
	assert.Equal(t, map[string]int64{acct: 250}, l.Points)
}
