package shop_test

import (
	"context"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// reasons is a consumer.DeadLetterSink that remembers the event IDs and reasons of its letters.
type reasons struct {
	mu      sync.Mutex
	letters map[string]string
}

func (r *reasons) DeadLetter(_ context.Context, d *consumer.Delivery, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.letters[d.EventID] = reason
	return nil
}

// The loyalty group's batch handler in a real batch callback: each order credited once (a second credit of
// an order under another event ID is a duplicate, in the same batch too), every account's points the sum of
// its credits after one upsert, and an invalid credit dead-lettered alone on its last attempt while the
// others commit once. // F38
func TestLoyaltyPointsCreditedBatch_CreditsEachOrderOnceAndDeadLettersTheInvalidCreditAlone(t *testing.T) {
	w := newWorld(t)
	store, err := dedup.NewStore(w.db)
	require.NoError(t, err)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	sink := &reasons{letters: map[string]string{}}
	cb := testenv.NewCallback(t, consumer.Config{Group: w.group, Subscriptions: []consumer.Subscription{{Topic: "SHOP_TEST"}},
		BatchSize: 16, MaxAttempts: 3, HandlerTimeout: 5 * time.Second},
		testenv.Must(middleware.Chain(dedup.HandleBatchJSON(w.shop.LoyaltyPointsCreditedBatch), middleware.Classify(), eventID,
			testenv.Must(middleware.Dedup(store)))), consumer.WithDeadLetterSink(sink))

	credit := func(order, event, account string, points int64) *primitive.MessageExt {
		d := w.delivery(shop.EventLoyaltyPointsCredited, w.name(event), w.name(account), 0,
			shop.LoyaltyPointsCredited{OrderNo: w.name(order), AccountID: w.name(account), Points: points})
		d.Msg.ReconsumeTimes = 2 // the last of MaxAttempts 3
		return d.Msg
	}
	msgs := []*primitive.MessageExt{
		credit("o1", "e1", "b", 100),
		credit("o2", "e2", "a", 50),
		credit("o3", "e3", "b", 25),
		credit("o1", "e1-again", "b", 100), // o1 once more under another event ID
		credit("o4", "e4", "a", 0),         // invalid
	}
	require.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs...))

	want := []consumer.Kind{consumer.KindProcessed, consumer.KindProcessed, consumer.KindProcessed, consumer.KindDuplicate, consumer.KindDeadLettered}
	for i, m := range msgs {
		dec := cb.Decisions(m.MsgId)
		require.Len(t, dec, 1, m.GetProperty(shop.PropEventID))
		assert.Equal(t, want[i], dec[0].Outcome.Kind, m.GetProperty(shop.PropEventID))
	}
	assert.Equal(t, map[string]string{w.name("e4"): "shop: invalid LoyaltyPointsCredited: points must be > 0"}, sink.letters)
	l, err := shop.RunLoyalty(w.ctx, w.db, w.prefix)
	require.NoError(t, err)
	assert.Equal(t, 3, l.Credits)
	assert.Equal(t, map[string]int64{w.name("a"): 50, w.name("b"): 125}, l.Points)

	require.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, msgs[:3]...), "a redelivery of the batch")
	l, err = shop.RunLoyalty(w.ctx, w.db, w.prefix)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{w.name("a"): 50, w.name("b"): 125}, l.Points, "applied once")
}
