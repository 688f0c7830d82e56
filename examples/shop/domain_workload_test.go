package shop_test

import (
	"encoding/json"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/examples/shop"
)

func demoWorkload() shop.DomainWorkload {
	return shop.DomainWorkload{RunID: "r1", Topic: "T", Orders: 200, PaidShare: 0.7, DuplicateShare: 0.1,
		FailOnce: 5, EarlyPaid: 10, LatePaid: 8, Accounts: 7, Skus: 5, Poison: true}
}

// The demo's plan: counts of each event kind, re-sends, early OrderPaids before their OrderCreated, late
// OrderPaids (version 2, new event ID) after their order's OrderPaid, stock and balances as the events imply.
func TestDomainWorkloadPlan_CountsOfEachEventKind(t *testing.T) {
	p, err := demoWorkload().Plan()
	require.NoError(t, err)

	assert.Equal(t, map[string]int{shop.EventOrderCreated: 200, shop.EventOrderPaid: 140, shop.EventPaymentCaptured: 140,
		shop.EventOrderCancelled: 60}, p.Events)
	assert.Len(t, p.Paid, 140)
	assert.Len(t, p.Cancelled, 60)
	assert.Equal(t, 54, p.Duplicates, "10 % of 540 events")
	assert.Equal(t, 10, p.Early)
	assert.Equal(t, 8, p.Late)
	require.Len(t, p.Messages, 540+54+8+1)

	perEvent := map[string]int{}
	perType := map[string]int{}
	first := map[string]int{}
	for k, m := range p.Messages {
		id := m.GetProperty(shop.PropEventID)
		if perEvent[id] == 0 {
			first[id] = k
			perType[m.GetProperty(shop.PropEventType)]++
		}
		perEvent[id]++
		assert.Equal(t, m.GetTags(), m.GetProperty(shop.PropEventType), "tag = EVENT_TYPE")
		assert.NotEmpty(t, m.GetShardingKey(), "every message names its queue's key (the order number)")
	}
	assert.Len(t, perEvent, 540+8+1, "events, late OrderPaids and the poison message")
	assert.Equal(t, map[string]int{shop.EventOrderCreated: 201, shop.EventOrderPaid: 148, shop.EventPaymentCaptured: 140,
		shop.EventOrderCancelled: 60}, perType, "the late OrderPaids and the poison OrderCreated are extra")
	twice := 0
	for _, n := range perEvent {
		require.LessOrEqual(t, n, 2)
		if n == 2 {
			twice++
		}
	}
	assert.Equal(t, 54, twice, "each re-send repeats one event once")

	early := 0
	for _, no := range p.Paid {
		paid, created := first[no+"-paid"], first[no+"-created"]
		if paid < created {
			early++
			assert.Less(t, created, p.SettleFrom, "an early OrderPaid is sent with the creations")
		}
		if late, ok := first[no+"-paid-late"]; ok {
			assert.Greater(t, late, paid, "a late OrderPaid follows its order's OrderPaid")
			assert.Equal(t, "2", p.Messages[late].GetProperty(shop.PropAggregateVersion))
			assert.Equal(t, no, p.Messages[late].GetProperty(shop.PropAggregateID))
		}
	}
	assert.Equal(t, 10, early)
	for _, no := range p.Cancelled {
		assert.GreaterOrEqual(t, first[no+"-cancelled"], p.SettleFrom, "cancellations are sent while the compensation job runs")
	}
	assert.Equal(t, p.PoisonEventID, p.Messages[len(p.Messages)-1].GetProperty(shop.PropEventID))
}

func TestDomainWorkloadPlan_StockAndBalancesFollowThePaidOrders(t *testing.T) {
	p, err := demoWorkload().Plan()
	require.NoError(t, err)
	var stock, opening, onHand, balances int64
	for _, v := range p.Seed.Stock {
		stock += v
	}
	for _, v := range p.Seed.Accounts {
		opening += v
	}
	for _, v := range p.OnHand {
		onHand += v
	}
	for _, v := range p.Balances {
		balances += v
	}
	var paidQty, paidAmount int64
	byNo := map[string]shop.OrderCreated{}
	for _, m := range p.Messages {
		if m.GetProperty(shop.PropEventType) == shop.EventOrderCreated && m.GetProperty(shop.PropEventID) != p.PoisonEventID {
			e, err := shop.Decode(m.Body)
			require.NoError(t, err)
			byNo[e.OrderNo] = e
		}
	}
	for _, no := range p.Paid {
		paidQty += int64(byNo[no].Quantity)
		paidAmount += byNo[no].AmountCents
	}
	assert.Len(t, p.Seed.Stock, 5)
	assert.Len(t, p.Seed.Accounts, 7)
	assert.Equal(t, stock-paidQty, onHand, "paid orders keep their stock; cancelled ones give it back")
	assert.Equal(t, opening-paidAmount, balances)
}

func TestDomainWorkloadPlan_BodiesDecode(t *testing.T) {
	p, err := demoWorkload().Plan()
	require.NoError(t, err)
	for _, m := range p.Messages[:len(p.Messages)-1] {
		var err error
		switch m.GetProperty(shop.PropEventType) {
		case shop.EventOrderCreated:
			_, err = shop.Decode(m.Body)
		case shop.EventOrderPaid:
			_, err = shop.DecodeOrderPaid(m.Body)
		case shop.EventPaymentCaptured:
			_, err = shop.DecodePaymentCaptured(m.Body)
		case shop.EventOrderCancelled:
			_, err = shop.DecodeOrderCancelled(m.Body)
		}
		require.NoError(t, err, "%s", m.Body)
		var body map[string]any
		require.NoError(t, json.Unmarshal(m.Body, &body))
		assert.Equal(t, m.GetProperty(shop.PropEventID), body["eventId"])
	}
	_, err = shop.Decode(p.Messages[len(p.Messages)-1].Body)
	assert.Error(t, err, "the poison body does not decode")
}

func TestDomainWorkloadPlan_RejectsBadInput(t *testing.T) {
	for name, w := range map[string]shop.DomainWorkload{
		"no run":          {Topic: "T", Orders: 1, Accounts: 1, Skus: 1},
		"no orders":       {RunID: "r", Topic: "T", Accounts: 1, Skus: 1},
		"paid share":      {RunID: "r", Topic: "T", Orders: 10, Accounts: 1, Skus: 1, PaidShare: 1.5},
		"dup share":       {RunID: "r", Topic: "T", Orders: 10, Accounts: 1, Skus: 1, DuplicateShare: 0.9},
		"too many early":  {RunID: "r", Topic: "T", Orders: 10, Accounts: 1, Skus: 1, PaidShare: 0.5, EarlyPaid: 6, LatePaid: 6},
		"fail once > all": {RunID: "r", Topic: "T", Orders: 10, Accounts: 1, Skus: 1, FailOnce: 11},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := w.Plan()
			assert.Error(t, err)
		})
	}
}

// The OrderCreated-only workload (chaos, end-to-end tests) carries version 1, so that a consumer that
// requires versions (the example's) handles it.
func TestWorkloadPlan_MessagesCarryVersionAndType(t *testing.T) {
	p, err := shop.Workload{RunID: "r1", Topic: "T", Messages: 10, Poison: true}.Plan()
	require.NoError(t, err)
	for _, m := range p.Messages {
		assertOrderCreatedProperties(t, m)
	}
}

func assertOrderCreatedProperties(t *testing.T, m *primitive.Message) {
	t.Helper()
	assert.Equal(t, "1", m.GetProperty(shop.PropAggregateVersion))
	assert.Equal(t, shop.EventOrderCreated, m.GetProperty(shop.PropEventType))
	assert.NotEmpty(t, m.GetProperty(shop.PropAggregateID))
}
