package shop_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// world is one test's slice of the real test database: its own prefix for orders, SKUs, accounts and
// event IDs, and its own consumer group.
type world struct {
	t      *testing.T
	ctx    context.Context
	db     *sqlx.DB
	shop   *shop.Shop
	prefix string
	group  string
}

func newWorld(t *testing.T, opts ...shop.Option) *world {
	t.Helper()
	db := shoptest.MySQL(t)
	s, err := shop.New(opts...)
	require.NoError(t, err)
	p := testenv.Unique("shop")
	return &world{t: t, ctx: context.Background(), db: db, shop: s, prefix: p + "-", group: p + "-cg"}
}

func (w *world) name(s string) string { return w.prefix + s }

// seed gives the world's SKU "sku" 100 units and its account "acct" 10,000 cents.
func (w *world) seed() {
	w.t.Helper()
	require.NoError(w.t, w.shop.Apply(w.ctx, w.db, shop.Seed{Run: w.prefix,
		Stock: map[string]int64{w.name("sku"): 100}, Accounts: map[string]int64{w.name("acct"): 10_000}}))
}

// delivery is a message of eventType for aggregate at version (0: no version property) with body as JSON.
func (w *world) delivery(eventType, eventID, aggregate string, version int64, body any) *consumer.Delivery {
	w.t.Helper()
	b, err := json.Marshal(body)
	require.NoError(w.t, err)
	ext := &primitive.MessageExt{Message: primitive.Message{Topic: "SHOP_TEST", Body: b}, MsgId: uuid.NewString()}
	msg := &ext.Message
	msg.WithTag(eventType)
	msg.WithProperty(shop.PropEventID, eventID)
	msg.WithProperty(shop.PropEventType, eventType)
	msg.WithProperty(shop.PropAggregateID, aggregate)
	if version > 0 {
		msg.WithProperty(shop.PropAggregateVersion, strconv.FormatInt(version, 10))
	}
	d := testenv.NewDelivery(w.group, ext)
	d.EventID, d.EventType, d.AggregateID, d.Version = eventID, eventType, aggregate, version
	d.MaxAttempts = 3
	return d
}

func (w *world) created(order string, qty int) *consumer.Delivery {
	no := w.name(order)
	return w.delivery(shop.EventOrderCreated, no+"-created", no, 1, shop.OrderCreated{EventID: no + "-created",
		OrderNo: no, AccountID: w.name("acct"), SkuID: w.name("sku"), Quantity: qty, AmountCents: 250})
}

func (w *world) paid(order, eventID string, version int64) *consumer.Delivery {
	no := w.name(order)
	return w.delivery(shop.EventOrderPaid, w.name(eventID), no, version, shop.OrderPaid{EventID: w.name(eventID), OrderNo: no, PaymentID: no + "-pay"})
}

func (w *world) cancelled(order, eventID string, version int64) *consumer.Delivery {
	no := w.name(order)
	return w.delivery(shop.EventOrderCancelled, w.name(eventID), no, version, shop.OrderCancelled{EventID: w.name(eventID), OrderNo: no})
}

func (w *world) captured(payment, eventID string, amount int64) *consumer.Delivery {
	return w.delivery(shop.EventPaymentCaptured, w.name(eventID), w.name("acct"), 0, shop.PaymentCaptured{EventID: w.name(eventID),
		PaymentID: w.name(payment), AccountID: w.name("acct"), OrderNo: w.name("o1"), AmountCents: amount})
}

// handle runs the shop's handler on d in a transaction of its own, committed like the dedup middleware
// commits (Processed or Duplicate without error), rolled back otherwise.
func (w *world) handle(d *consumer.Delivery) (consumer.Outcome, error) {
	w.t.Helper()
	tx, err := w.db.BeginTxx(w.ctx, nil)
	require.NoError(w.t, err)
	o, err := w.shop.Handle(w.ctx, tx, d)
	if err == nil && (o.Kind == consumer.KindProcessed || o.Kind == consumer.KindDuplicate) {
		require.NoError(w.t, tx.Commit())
		return o, nil
	}
	require.NoError(w.t, tx.Rollback())
	return o, err
}

// mustHandle handles d and requires the outcome kind want without error.
func (w *world) mustHandle(d *consumer.Delivery, want consumer.Kind) consumer.Outcome {
	w.t.Helper()
	o, err := w.handle(d)
	require.NoError(w.t, err)
	require.Equal(w.t, want, o.Kind, "outcome %s", o)
	return o
}

// order reads the order's status and version.
func (w *world) order(order string) (status string, version int64) {
	w.t.Helper()
	require.NoError(w.t, w.db.QueryRowx(`SELECT status, version FROM orders WHERE order_no = ?`, w.name(order)).Scan(&status, &version))
	return status, version
}

func (w *world) int(query string, args ...any) int64 {
	w.t.Helper()
	var n int64
	require.NoError(w.t, w.db.Get(&n, query, args...))
	return n
}

func (w *world) onHand() int64 {
	return w.int(`SELECT on_hand FROM inventory WHERE sku_id = ?`, w.name("sku"))
}

func (w *world) balance() int64 {
	return w.int(`SELECT balance FROM account WHERE account_id = ?`, w.name("acct"))
}

// chain is the example's chain without logging and metrics: Classify, EventID, CheckOrderAggregate, Dedup, Version (order
// events, orders.version, required, gap retried gapRetries times) and the shop's handlers.
func (w *world) chain(gapRetries int) consumer.Handler {
	w.t.Helper()
	store, err := dedup.NewStore(w.db)
	require.NoError(w.t, err)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(w.t, err)
	version, err := middleware.Version(store, middleware.VersionConfig{AggregateType: "order", EventTypes: shop.OrderEventTypes(),
		Load: w.shop.LoadOrderVersion, Require: true, GapRetries: gapRetries, GapDelayLevel: 1})
	require.NoError(w.t, err)
	return testenv.Must(middleware.Chain(dedup.Handle(w.shop.Handle), middleware.Classify(), eventID, shop.CheckOrderAggregate(),
		testenv.Must(middleware.Dedup(store)), version))
}

// through runs d through h as a fresh delivery (the chain fills in the event's identity again).
func (w *world) through(h consumer.Handler, d *consumer.Delivery) consumer.Outcome {
	w.t.Helper()
	fresh := testenv.NewDelivery(d.Group, d.Msg)
	fresh.Attempt, fresh.MaxAttempts = d.Attempt, d.MaxAttempts
	o, _ := h.Handle(w.ctx, fresh)
	return o
}
