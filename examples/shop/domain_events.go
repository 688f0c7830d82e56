package shop

import (
	"encoding/json"
	"fmt"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// order is one order of a DomainWorkload with everything its events carry.
type order struct {
	no, sku, account, payment string
	qty, amount               int64
	failOnce, isPaid          bool
}

// sku, account and order name the workload's k-th SKU, k-th account and i-th order.
func (w DomainWorkload) sku(k int) string     { return fmt.Sprintf("%s-sku-%d", w.RunID, k) }
func (w DomainWorkload) account(k int) string { return fmt.Sprintf("%s-acct-%d", w.RunID, k) }
func (w DomainWorkload) order(i int) order {
	return order{
		no: fmt.Sprintf("%s-o%d", w.RunID, i), sku: w.sku(i % w.Skus), account: w.account(i % w.Accounts),
		payment: fmt.Sprintf("%s-pay%d", w.RunID, i), qty: int64(1 + i%5), amount: int64(100 + i),
		failOnce: i < w.FailOnce, isPaid: int(float64(i+1)*w.PaidShare) > int(float64(i)*w.PaidShare),
	}
}

// event is one event to send: its properties, body and sharding key (the order number).
type event struct {
	typ, id, aggregate, shard string
	version                   int64
	body                      any
	// late marks a late OrderPaid (no effect); resent marks a re-send; seq is the event's place in the plan.
	late, resent bool
	seq          int
}

func (o order) created() event {
	return event{typ: EventOrderCreated, id: o.no + "-created", aggregate: o.no, shard: o.no, version: VersionCreated,
		body: OrderCreated{EventID: o.no + "-created", OrderNo: o.no, AccountID: o.account, SkuID: o.sku,
			Quantity: int(o.qty), AmountCents: o.amount, FailOnce: o.failOnce}}
}

func (o order) paid() event {
	return event{typ: EventOrderPaid, id: o.no + "-paid", aggregate: o.no, shard: o.no, version: VersionSettled,
		body: OrderPaid{EventID: o.no + "-paid", OrderNo: o.no, PaymentID: o.payment}}
}

// latePaid is an OrderPaid of version 2 with a new event ID, sent after the order was paid.
func (o order) latePaid() event {
	e := o.paid()
	e.id, e.late = o.no+"-paid-late", true
	e.body = OrderPaid{EventID: e.id, OrderNo: o.no, PaymentID: o.payment}
	return e
}

func (o order) captured() event {
	return event{typ: EventPaymentCaptured, id: o.no + "-captured", aggregate: o.account, shard: o.no,
		body: PaymentCaptured{EventID: o.no + "-captured", PaymentID: o.payment, AccountID: o.account, OrderNo: o.no, AmountCents: o.amount}}
}

func (o order) cancelled() event {
	return event{typ: EventOrderCancelled, id: o.no + "-cancelled", aggregate: o.no, shard: o.no, version: VersionSettled,
		body: OrderCancelled{EventID: o.no + "-cancelled", OrderNo: o.no, Reason: "payment timeout"}}
}

// message encodes e: tag and EVENT_TYPE = its type, KEYS and sharding key = its order number.
func (e event) message(topic string) (*primitive.Message, error) {
	body, err := json.Marshal(e.body)
	if err != nil {
		return nil, fmt.Errorf("domain workload: encode %s: %w", e.id, err)
	}
	msg := primitive.NewMessage(topic, body)
	msg.WithTag(e.typ)
	msg.WithKeys([]string{e.shard})
	msg.WithShardingKey(e.shard)
	setProperties(msg, e.id, e.typ, e.aggregate, e.version)
	return msg, nil
}

// resend numbers the events and adds n re-sends (same event, a new message) of events spread evenly over
// the ones that are not late, each three places after its original.
func resend(all []event, n int) []event {
	var candidates []int
	for i := range all {
		all[i].seq = i
		if !all[i].late {
			candidates = append(candidates, i)
		}
	}
	after := map[int][]int{}
	for j := range n {
		i := candidates[j*len(candidates)/n]
		after[i+3] = append(after[i+3], i)
	}
	out := make([]event, 0, len(all)+n)
	for i := range len(all) + 3 {
		if i < len(all) {
			out = append(out, all[i])
		}
		for _, orig := range after[i] {
			e := all[orig]
			e.resent = true
			out = append(out, e)
		}
	}
	return out
}

// settleIndex is the place of the first original event numbered ≥ first (the first settling event).
func settleIndex(events []event, first int) int {
	for k, e := range events {
		if !e.resent && e.seq >= first {
			return k
		}
	}
	return len(events)
}

// poisonMessage is an OrderCreated whose body is not JSON (with version 1, so it reaches the handler).
func poisonMessage(topic, eventID string) *primitive.Message {
	msg := primitive.NewMessage(topic, []byte(`{"eventId": "`+eventID+`", "orderNo": `))
	msg.WithTag(EventOrderCreated)
	msg.WithKeys([]string{eventID})
	msg.WithShardingKey(eventID)
	setProperties(msg, eventID, EventOrderCreated, eventID, VersionCreated)
	return msg
}
