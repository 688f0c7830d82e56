package shop

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/retry"
)

// Order statuses. An order is created WAIT_PAY (version 1) and moves once, to PAID or CANCELLED (version 2).
// StatusCreated is what orders written before migration 00002 carry (the OrderCreated-only example): they
// are left as they were, and are treated like WAIT_PAY (they may be paid or cancelled).
const (
	// StatusWaitPay: created, waiting for payment (version 1).
	StatusWaitPay = "WAIT_PAY"
	// StatusPaid: paid (version 2); final.
	StatusPaid = "PAID"
	// StatusCancelled: cancelled and its stock released (version 2); final.
	StatusCancelled = "CANCELLED"
	// StatusCreated: an order from before migration 00002, treated like WAIT_PAY.
	StatusCreated = "CREATED"
)

// Kinds of account_transaction rows.
const (
	// KindOpening is an opening deposit (amount > 0).
	KindOpening = "OPENING"
	// KindPayment is a captured payment (amount < 0: a debit of the customer's account).
	KindPayment = "PAYMENT"
)

// Business unique keys (inventory_change.change_id, account_transaction.transaction_id): one row per business
// action, derived from the action itself (not the event ID), whoever records it first — a message, its
// re-send under another event ID, or the compensation job.

// ReserveChangeID is the inventory_change key of an order's stock reservation.
func ReserveChangeID(orderNo string) string { return "reserve:" + orderNo }

// ReleaseChangeID is the inventory_change key of the release of a cancelled order's stock.
func ReleaseChangeID(orderNo string) string { return "release:" + orderNo }

// StockChangeID is the inventory_change key of the demo's stock delivery for sku in a run.
func StockChangeID(run, sku string) string { return "stock:" + run + ":" + sku }

// PayTransactionID is the account_transaction key of a captured payment.
func PayTransactionID(paymentID string) string { return "pay:" + paymentID }

// OpenTransactionID is the account_transaction key of the demo's opening deposit of account in a run.
func OpenTransactionID(run, account string) string { return "open:" + run + ":" + account }

// Shop holds the domain's tables: the order state machine and the two business action tables. It has no
// mutable state; one value serves every goroutine.
type Shop struct {
	orders       *dedup.States
	changes      *dedup.Actions
	transactions *dedup.Actions
	credits      *dedup.Actions
	// followUps is what a paid order causes outside the shop's tables (WithFollowUps); nil: nothing.
	followUps FollowUps
	// handlers maps each event type to its typed handler (dedup.Typed: the JSON body decoded into the
	// event's type); built by New, read only.
	handlers map[string]dedup.TxHandler
}

// New returns the domain's handlers, configured by opts. It fails only if the table names do not pass dedup's identifier
// checks (or the helpers are missing).
func New(opts ...Option) (*Shop, error) {
	orders, err := dedup.NewStates(dedup.StateTable{Table: "orders", KeyColumn: "order_no"})
	if err != nil {
		return nil, fmt.Errorf("shop: orders: %w", err)
	}
	changes, err := dedup.NewActions(dedup.ActionTable{Table: "inventory_change", KeyColumn: "change_id"})
	if err != nil {
		return nil, fmt.Errorf("shop: inventory_change: %w", err)
	}
	transactions, err := dedup.NewActions(dedup.ActionTable{Table: "account_transaction", KeyColumn: "transaction_id"})
	if err != nil {
		return nil, fmt.Errorf("shop: account_transaction: %w", err)
	}
	credits, err := dedup.NewActions(dedup.ActionTable{Table: "loyalty_credit", KeyColumn: "credit_id"})
	if err != nil {
		return nil, fmt.Errorf("shop: loyalty_credit: %w", err)
	}
	s := &Shop{orders: orders, changes: changes, transactions: transactions, credits: credits}
	for _, opt := range opts {
		opt(s)
	}
	s.handlers = map[string]dedup.TxHandler{
		EventOrderCreated:          dedup.Typed(consumer.JSON{}, s.OrderCreated),
		EventOrderPaid:             dedup.Typed(consumer.JSON{}, s.OrderPaid),
		EventPaymentCaptured:       dedup.Typed(consumer.JSON{}, s.PaymentCaptured),
		EventOrderCancelled:        dedup.Typed(consumer.JSON{}, s.OrderCancelled),
		EventLoyaltyPointsCredited: dedup.Typed(consumer.JSON{}, s.LoyaltyPointsCredited),
	}
	return s, nil
}

// Handle routes d by its event type (Delivery.EventType: the EVENT_TYPE property, else the tag) to the
// event's handler, which gets the body decoded as JSON into the event's type (fields it does not know are
// accepted: producers evolve). A body that is not JSON of that shape is dead-lettered at once with the
// reason "undecodable body: …" (dedup.Typed); one whose fields are invalid is a permanent error (the DLQ,
// with the problems listed). An unknown type is a permanent error: the message goes to the DLQ with the
// reason.
func (s *Shop) Handle(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
	if h, ok := s.handlers[d.EventType]; ok {
		return h(ctx, tx, d)
	}
	return consumer.Outcome{}, retry.Permanentf("shop: unknown event type %q (want one of %v)", d.EventType, EventTypes())
}

// HandleOrderCreated is Shop.OrderCreated for callers without a Shop (the OrderCreated-only tests and
// benchmarks); it builds the tables' helpers on every call.
func HandleOrderCreated(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
	s, err := New()
	if err != nil {
		return consumer.Outcome{}, err
	}
	return s.handlers[EventOrderCreated](ctx, tx, d)
}

// LoadOrderVersion is the example's middleware.VersionLoader: the order's version column, 0 when the order
// does not exist (dedup.States.LoadVersion: a plain read; the handler's conditional UPDATE settles a
// concurrent change).
func (s *Shop) LoadOrderVersion(ctx context.Context, tx *sqlx.Tx, orderNo string) (int64, error) {
	return s.orders.LoadVersion(ctx, tx, orderNo)
}

// eventVersion is the version the Version middleware found on d, or def when it did not run.
func eventVersion(d *consumer.Delivery, def int64) int64 {
	if d.Version > 0 {
		return d.Version
	}
	return def
}

// adjustStock adds delta (≠ 0) to sku's stock on hand, creating the row (from 0) when the SKU has none yet.
func adjustStock(ctx context.Context, tx *sqlx.Tx, sku string, delta int64, now time.Time) error {
	// One statement for both cases: an UPDATE that finds no row and then an INSERT took gap locks, and two
	// orders creating the first row of one new SKU at once deadlocked (1213); here the second waits for the
	// first's row and then adds to it.
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO inventory (sku_id, on_hand, updated_at) VALUES (?, ?, ?)
		 ON DUPLICATE KEY UPDATE on_hand = on_hand + VALUES(on_hand), updated_at = VALUES(updated_at)`,
		sku, delta, now); err != nil {
		return fmt.Errorf("shop: stock of %s: %w", sku, err)
	}
	return nil
}
