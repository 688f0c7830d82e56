package main

import (
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
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
)

// --gap-retries counts the deliveries a version gap waits: with --gap-retries 0 (accepted by validate,
// "must be ≥ 0") an OrderPaid whose order does not exist yet is dead-lettered on its first delivery, not
// retried the library's default 3 times; with 2 it is retried on deliveries 0 and 1, dead-lettered on 2.
func TestChain_GapRetriesFlagCountsDeliveries(t *testing.T) {
	db := shoptest.MySQL(t)
	require.NoError(t, shop.Migrate(t.Context(), db.DB))
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	run := testenv.Unique("gap")
	paid := func(attempt int) *consumer.Delivery {
		no := run + "-o1"
		body := `{"eventId":"` + no + `-paid","orderNo":"` + no + `","paymentId":"` + no + `-pay"}`
		ext := &primitive.MessageExt{Message: primitive.Message{Topic: "SHOP_TEST", Body: []byte(body)}, MsgId: run, ReconsumeTimes: int32(attempt)}
		ext.WithTag(shop.EventOrderPaid)
		ext.WithProperty(shop.PropEventID, no+"-paid")
		ext.WithProperty(shop.PropEventType, shop.EventOrderPaid)
		ext.WithProperty(shop.PropAggregateID, no)
		ext.WithProperty(shop.PropAggregateVersion, "2")
		d := testenv.NewDelivery(run+"-cg", ext)
		d.MaxAttempts = 5
		return d
	}
	outcome := func(gapRetries, attempt int) consumer.Kind {
		m, err := metrics.New(prometheus.NewRegistry())
		require.NoError(t, err)
		sh, err := shop.New()
		require.NoError(t, err)
		h, err := chain(sh, store, nil, m, zap.NewNop(), runOptions{gapRetries: gapRetries, gapDelayLevel: 1, handlerTimeout: 5 * time.Second})
		require.NoError(t, err)
		o, _ := h.Handle(t.Context(), paid(attempt))
		return o.Kind
	}

	assert.Equal(t, consumer.KindDeadLetter, outcome(0, 0), "--gap-retries 0: no wait")
	assert.Equal(t, consumer.KindRetry, outcome(2, 0))
	assert.Equal(t, consumer.KindRetry, outcome(2, 1))
	assert.Equal(t, consumer.KindDeadLetter, outcome(2, 2))
}
