package shop

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Workload describes a batch of OrderCreated messages for the chaos runs and the end-to-end tests (the demo
// sends a DomainWorkload).
type Workload struct {
	// RunID prefixes every event ID and order number, so runs never collide. Required.
	RunID string
	// Topic is the topic to send to. Required.
	Topic string
	// Messages is the number of physical messages, duplicates included, poison excluded.
	Messages int
	// DuplicateShare is the share of Messages that re-send an earlier event as a new message (new message
	// ID, same EVENT_ID), as a producer retry or a business re-send would. 0..0.5.
	DuplicateShare float64
	// FailOnce is how many events fail their first attempt with a transient error.
	FailOnce int
	// Poison adds one message whose body is not JSON; it must end in the DLQ.
	Poison bool
}

// Plan is what a Workload sends and what a correct consumer must make of it.
type Plan struct {
	// Messages are the messages to send, in order.
	Messages []*primitive.Message
	// Events is the number of distinct valid events: the effects a correct consumer writes.
	Events int
	// Duplicates is the number of re-sent messages.
	Duplicates int
	// PoisonEventID is the EVENT_ID of the poison message, "" without one.
	PoisonEventID string
}

// Plan builds the messages. Event i has EVENT_ID "<run>-e<i>" and order number "<run>-o<i>"; every
// re-send follows its original a few messages later.
func (w Workload) Plan() (Plan, error) {
	if w.RunID == "" || w.Topic == "" {
		return Plan{}, fmt.Errorf("workload: RunID and Topic are required")
	}
	if w.Messages < 1 || w.DuplicateShare < 0 || w.DuplicateShare > 0.5 {
		return Plan{}, fmt.Errorf("workload: Messages must be ≥ 1 and DuplicateShare in 0..0.5 (got %d, %g)", w.Messages, w.DuplicateShare)
	}
	dups := int(float64(w.Messages) * w.DuplicateShare)
	events := w.Messages - dups
	if w.FailOnce > events {
		return Plan{}, fmt.Errorf("workload: FailOnce %d exceeds the %d events", w.FailOnce, events)
	}
	// Re-send j duplicates event j*events/dups, three messages after its original.
	resendAfter := make(map[int][]int, dups)
	for j := range dups {
		i := j * events / dups
		resendAfter[i+3] = append(resendAfter[i+3], i)
	}
	p := Plan{Events: events, Duplicates: dups}
	for i := range events + 3 {
		if i < events {
			msg, err := w.message(w.event(i))
			if err != nil {
				return Plan{}, err
			}
			p.Messages = append(p.Messages, msg)
		}
		for _, orig := range resendAfter[i] {
			msg, err := w.message(w.event(orig))
			if err != nil {
				return Plan{}, err
			}
			p.Messages = append(p.Messages, msg)
		}
	}
	if w.Poison {
		p.PoisonEventID = w.RunID + "-poison"
		msg := poisonMessage(w.Topic, p.PoisonEventID)
		p.Messages = append(p.Messages, msg)
	}
	return p, nil
}

// event is event i of the run; the first FailOnce events fail their first attempt. The run's 17 SKUs are its
// own (RunID-sku-N): a SKU's stock row is locked by every reservation until its transaction ends, so SKUs
// shared between runs would make one run's slow or hung handler hold up another's.
func (w Workload) event(i int) OrderCreated {
	return OrderCreated{
		EventID: fmt.Sprintf("%s-e%d", w.RunID, i), OrderNo: fmt.Sprintf("%s-o%d", w.RunID, i),
		SkuID: fmt.Sprintf("%s-sku-%d", w.RunID, i%17), Quantity: 1 + i%5, AmountCents: int64(100 + i),
		FailOnce: i < w.FailOnce,
	}
}

func (w Workload) message(e OrderCreated) (*primitive.Message, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("workload: encode %s: %w", e.EventID, err)
	}
	msg := primitive.NewMessage(w.Topic, body)
	msg.WithTag(EventOrderCreated)
	msg.WithKeys([]string{e.OrderNo})
	setProperties(msg, e.EventID, EventOrderCreated, e.OrderNo, VersionCreated)
	return msg, nil
}

// setProperties sets the properties every event carries: EVENT_ID, EVENT_TYPE, AGGREGATE_ID and, when
// version > 0, AGGREGATE_VERSION.
func setProperties(msg *primitive.Message, eventID, eventType, aggregateID string, version int64) {
	msg.WithProperty(PropEventID, eventID)
	msg.WithProperty(PropEventType, eventType)
	msg.WithProperty(PropAggregateID, aggregateID)
	if version > 0 {
		msg.WithProperty(PropAggregateVersion, strconv.FormatInt(version, 10))
	}
}
