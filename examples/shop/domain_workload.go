package shop

import (
	"fmt"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Seed sizes of a DomainWorkload: every SKU receives DemoStock units and every account DemoOpening cents
// before the orders are sent, so stock and balances stay positive.
const (
	// DemoStock is the units each SKU receives.
	DemoStock int64 = 100_000
	// DemoOpening is the opening deposit of each account in cents.
	DemoOpening int64 = 100_000_000
)

// DomainWorkload describes the demo's messages on the whole domain: per order an OrderCreated, then either
// OrderPaid + PaymentCaptured or OrderCancelled, with re-sends, events sent out of order and late stale ones.
type DomainWorkload struct {
	// RunID prefixes every event ID, order number, SKU, account and payment ID. Required.
	RunID string
	// Topic is the topic to send to. Required.
	Topic string
	// Orders is the number of orders, ≥ 1.
	Orders int
	// PaidShare is the share of orders that are paid (0..1); the others are cancelled.
	PaidShare float64
	// DuplicateShare is the share of events re-sent as new messages with the same EVENT_ID, 0..0.5.
	DuplicateShare float64
	// FailOnce is how many OrderCreated events fail their first attempt (the first ones).
	FailOnce int
	// EarlyPaid is how many paid orders get their OrderPaid sent before their OrderCreated (a version gap
	// the consumer retries until the order exists).
	EarlyPaid int
	// LatePaid is how many paid orders get, at the end, a second OrderPaid of version 2 with a new event ID
	// (a late event of an old version: acknowledged as stale).
	LatePaid int
	// Accounts and Skus are how many accounts pay and SKUs are ordered, each ≥ 1.
	Accounts, Skus int
	// Poison adds one OrderCreated whose body is not JSON; it must end in the DLQ.
	Poison bool
}

// DomainPlan is what a DomainWorkload sends and what a correct consumer must make of it.
type DomainPlan struct {
	// Messages are the messages to send, in order.
	Messages []*primitive.Message
	// SettleFrom splits Messages: Messages[SettleFrom:] settle the orders (paid, captured, cancelled,
	// late), the ones before create them (and carry the early OrderPaids).
	SettleFrom int
	// Seed is the stock and the accounts to apply before sending.
	Seed Seed
	// Events counts the distinct events with an effect, per event type (late OrderPaids and the poison
	// message excluded).
	Events map[string]int
	// Duplicates is the number of re-sent messages; Early and Late the early and late OrderPaids.
	Duplicates, Early, Late int
	// Paid and Cancelled are the order numbers of each kind, in order.
	Paid, Cancelled []string
	// OnHand and Balances are the stock per SKU and the balance per account once every event took effect;
	// Points the loyalty points per account (a paid order's amount in cents, credited once).
	OnHand, Balances, Points map[string]int64
	// PoisonEventID is the EVENT_ID of the poison message, "" without one.
	PoisonEventID string
}

// TotalEvents is the number of distinct events with an effect.
func (p DomainPlan) TotalEvents() int {
	n := 0
	for _, c := range p.Events {
		n += c
	}
	return n
}

// validate checks the workload; the error names the field.
func (w DomainWorkload) validate() error {
	switch {
	case w.RunID == "" || w.Topic == "":
		return fmt.Errorf("domain workload: RunID and Topic are required")
	case w.Orders < 1 || w.Accounts < 1 || w.Skus < 1:
		return fmt.Errorf("domain workload: Orders, Accounts and Skus must be ≥ 1 (got %d, %d, %d)", w.Orders, w.Accounts, w.Skus)
	case w.PaidShare < 0 || w.PaidShare > 1:
		return fmt.Errorf("domain workload: PaidShare %g must be in 0..1", w.PaidShare)
	case w.DuplicateShare < 0 || w.DuplicateShare > 0.5:
		return fmt.Errorf("domain workload: DuplicateShare %g must be in 0..0.5", w.DuplicateShare)
	case w.FailOnce < 0 || w.FailOnce > w.Orders:
		return fmt.Errorf("domain workload: FailOnce %d must be in 0..Orders (%d)", w.FailOnce, w.Orders)
	case w.EarlyPaid < 0 || w.LatePaid < 0:
		return fmt.Errorf("domain workload: EarlyPaid %d and LatePaid %d must be ≥ 0", w.EarlyPaid, w.LatePaid)
	}
	return nil
}

// Plan builds the seed and the messages. Order i is "<run>-o<i>" (SKU "<run>-sku-<i mod Skus>", account
// "<run>-acct-<i mod Accounts>", quantity 1+i mod 5, amount 100+i cents); the paid orders are spread
// evenly (order i is paid when ⌊(i+1)·PaidShare⌋ > ⌊i·PaidShare⌋: ⌊Orders·PaidShare⌋ of them). Early OrderPaids are those of the first paid orders after the FailOnce ones; late ones go
// to the last paid orders that are not early. Re-sends follow their original three messages later.
// It fails when the workload is invalid, or has fewer paid orders than EarlyPaid + LatePaid.
func (w DomainWorkload) Plan() (DomainPlan, error) {
	if err := w.validate(); err != nil {
		return DomainPlan{}, err
	}
	p := DomainPlan{Events: map[string]int{}, OnHand: map[string]int64{}, Balances: map[string]int64{}, Points: map[string]int64{},
		Seed: Seed{Run: w.RunID, Stock: map[string]int64{}, Accounts: map[string]int64{}}}
	for k := range w.Skus {
		p.Seed.Stock[w.sku(k)] = DemoStock
		p.OnHand[w.sku(k)] = DemoStock
	}
	for k := range w.Accounts {
		p.Seed.Accounts[w.account(k)] = DemoOpening
		p.Balances[w.account(k)] = DemoOpening
	}
	orders := make([]order, w.Orders)
	var paid []int
	for i := range orders {
		orders[i] = w.order(i)
		if orders[i].isPaid {
			paid = append(paid, i)
		}
	}
	early, late, err := w.pickEarlyAndLate(paid)
	if err != nil {
		return DomainPlan{}, err
	}
	p.Early, p.Late = len(early), len(late)
	var creating, settling []event
	for i, o := range orders {
		if early[i] {
			creating = append(creating, o.paid())
		}
		creating = append(creating, o.created())
		if !o.isPaid {
			p.Cancelled = append(p.Cancelled, o.no)
			settling = append(settling, o.cancelled())
			continue
		}
		p.Paid = append(p.Paid, o.no)
		p.OnHand[o.sku] -= o.qty
		p.Balances[o.account] -= o.amount
		p.Points[o.account] += o.amount
		if !early[i] {
			settling = append(settling, o.paid())
		}
		settling = append(settling, o.captured())
	}
	for _, i := range late {
		settling = append(settling, orders[i].latePaid())
	}
	return w.assemble(p, creating, settling)
}

// pickEarlyAndLate chooses the paid orders (indices) whose OrderPaid is sent early — the first ones after
// the FailOnce orders, so that a gap never waits on a failing OrderCreated — and the ones that get a late
// OrderPaid: the last ones, never early.
func (w DomainWorkload) pickEarlyAndLate(paid []int) (map[int]bool, []int, error) {
	if w.EarlyPaid+w.LatePaid > len(paid) {
		return nil, nil, fmt.Errorf("domain workload: EarlyPaid %d + LatePaid %d exceed the %d paid orders", w.EarlyPaid, w.LatePaid, len(paid))
	}
	early := map[int]bool{}
	for _, i := range paid {
		if len(early) == w.EarlyPaid {
			break
		}
		if i >= w.FailOnce {
			early[i] = true
		}
	}
	var late []int
	for k := len(paid) - 1; k >= 0 && len(late) < w.LatePaid; k-- {
		if !early[paid[k]] {
			late = append(late, paid[k])
		}
	}
	if len(early) < w.EarlyPaid || len(late) < w.LatePaid {
		return nil, nil, fmt.Errorf("domain workload: not enough paid orders for EarlyPaid %d (after FailOnce %d) and LatePaid %d",
			w.EarlyPaid, w.FailOnce, w.LatePaid)
	}
	return early, late, nil
}

// assemble counts the events, adds the re-sends and the poison message, and encodes the messages.
func (w DomainWorkload) assemble(p DomainPlan, creating, settling []event) (DomainPlan, error) {
	all := append(append([]event{}, creating...), settling...)
	for _, e := range all {
		if !e.late {
			p.Events[e.typ]++
		}
	}
	distinct := p.TotalEvents()
	p.Duplicates = int(float64(distinct) * w.DuplicateShare)
	withResends := resend(all, p.Duplicates)
	p.SettleFrom = settleIndex(withResends, len(creating))
	for _, e := range withResends {
		msg, err := e.message(w.Topic)
		if err != nil {
			return DomainPlan{}, err
		}
		p.Messages = append(p.Messages, msg)
	}
	if w.Poison {
		p.PoisonEventID = w.RunID + "-poison"
		p.Messages = append(p.Messages, poisonMessage(w.Topic, p.PoisonEventID))
	}
	return p, nil
}
