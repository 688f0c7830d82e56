package shop_test

import (
	"context"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// The ledger exists to make a double apply visible: an event applied twice without the dedup (two plain
// transactions) leaves one order (its primary key refuses the second) but two ledger rows.
func TestLedger_ShowsADoubleApplyThatTheBusinessKeyHides(t *testing.T) {
	db := shoptest.MySQL(t)
	run := testenv.Unique("ledger")
	l := testenv.NewLedger(t, db, run)
	msg := &primitive.MessageExt{MsgId: testenv.Unique("msg"), Message: primitive.Message{Topic: "ORDER",
		Body: []byte(`{"eventId":"` + run + `-e","orderNo":"` + run + `-o","skuId":"sku-1","quantity":1,"amountCents":100}`)}}
	d := testenv.NewDelivery("cg", msg)
	d.EventID = run + "-e"
	h := l.Handler(shop.HandleOrderCreated)

	for range 2 {
		tx, err := db.Beginx()
		require.NoError(t, err)
		o, err := h(context.Background(), tx, d)
		require.NoError(t, err)
		assert.Equal(t, consumer.KindProcessed, o.Kind)
		require.NoError(t, tx.Commit())
	}

	orders, _, err := shop.Effects(context.Background(), db, run)
	require.NoError(t, err)
	assert.Equal(t, 1, orders, "the business key caps the orders at one")
	assert.Equal(t, 2, l.Count(t, d.EventID), "the ledger shows both applies")
	assert.Equal(t, map[string]int{d.EventID: 2}, l.Repeated(t))
	events, rows := l.Totals(t)
	assert.Equal(t, 1, events)
	assert.Equal(t, 2, rows)
}

func TestLedger_FailedHandlerAppendsNothing(t *testing.T) {
	db := shoptest.MySQL(t)
	run := testenv.Unique("ledger")
	l := testenv.NewLedger(t, db, run)
	d := testenv.NewDelivery("cg", &primitive.MessageExt{Message: primitive.Message{Topic: "ORDER", Body: []byte(`not json`)}})
	d.EventID = run + "-e"
	tx, err := db.Beginx()
	require.NoError(t, err)

	_, err = l.Handler(shop.HandleOrderCreated)(context.Background(), tx, d)

	require.Error(t, err)
	require.NoError(t, tx.Commit())
	assert.Zero(t, l.Count(t, d.EventID))
}
