package shop

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/retry"
)

// Event types: each is also the message's tag on the demo topic and its EVENT_TYPE property.
const (
	// EventOrderCreated creates an order (version 1, WAIT_PAY) and reserves its stock.
	EventOrderCreated = "OrderCreated"
	// EventOrderPaid moves an order WAIT_PAY → PAID (version 2).
	EventOrderPaid = "OrderPaid"
	// EventPaymentCaptured debits the customer's account (account aggregate, no version).
	EventPaymentCaptured = "PaymentCaptured"
	// EventOrderCancelled moves an order WAIT_PAY → CANCELLED (version 2) and releases its stock.
	EventOrderCancelled = "OrderCancelled"
)

// EventTypes lists every event type the example consumes, in the order of an order's life.
func EventTypes() []string {
	return []string{EventOrderCreated, EventOrderPaid, EventPaymentCaptured, EventOrderCancelled}
}

// OrderEventTypes lists the event types of the order aggregate, the ones whose version is checked.
func OrderEventTypes() []string {
	return []string{EventOrderCreated, EventOrderPaid, EventOrderCancelled}
}

// Message properties the producer sets (besides the tag): the event ID, the event type, the aggregate ID
// (order number, or account ID for PaymentCaptured) and the aggregate version (order events only).
const (
	// PropEventID holds the business event ID, the idempotency key.
	PropEventID = "EVENT_ID"
	// PropEventType holds the event type (also the tag).
	PropEventType = "EVENT_TYPE"
	// PropAggregateID holds the order number, or the account ID of a PaymentCaptured.
	PropAggregateID = "AGGREGATE_ID"
	// PropAggregateVersion holds the order's version after the event, a decimal integer ≥ 1.
	PropAggregateVersion = "AGGREGATE_VERSION"
)

// Order versions of this domain's flow: OrderCreated makes version 1; OrderPaid or OrderCancelled moves it
// to version 2.
const (
	// VersionCreated is the version of a new order (WAIT_PAY).
	VersionCreated int64 = 1
	// VersionSettled is the version of a paid or cancelled order.
	VersionSettled int64 = 2
)

// OrderCreated is the JSON body of an OrderCreated event.
type OrderCreated struct {
	// EventID is the business event ID; producers also put it in the EVENT_ID property.
	EventID string `json:"eventId"`
	// OrderNo is the order number, the aggregate ID.
	OrderNo string `json:"orderNo"`
	// AccountID is the paying customer's account; optional ("" for the OrderCreated-only workloads).
	AccountID string `json:"accountId,omitempty"`
	// SkuID is the stock-keeping unit reserved.
	SkuID string `json:"skuId"`
	// Quantity is the number of units reserved, > 0.
	Quantity int `json:"quantity"`
	// AmountCents is the order total in cents, ≥ 0.
	AmountCents int64 `json:"amountCents"`
	// FailOnce makes the handler fail its first attempt with a transient error (a demo of retries).
	FailOnce bool `json:"failOnce,omitempty"`
}

// OrderPaid is the JSON body of an OrderPaid event.
type OrderPaid struct {
	// EventID is the business event ID.
	EventID string `json:"eventId"`
	// OrderNo is the order number, the aggregate ID.
	OrderNo string `json:"orderNo"`
	// PaymentID names the payment that paid the order.
	PaymentID string `json:"paymentId"`
}

// PaymentCaptured is the JSON body of a PaymentCaptured event: money taken from the customer's account.
type PaymentCaptured struct {
	// EventID is the business event ID.
	EventID string `json:"eventId"`
	// PaymentID names the payment; the account transaction's ID is PayTransactionID(PaymentID).
	PaymentID string `json:"paymentId"`
	// AccountID is the debited account, the aggregate ID.
	AccountID string `json:"accountId"`
	// OrderNo is the order paid.
	OrderNo string `json:"orderNo"`
	// AmountCents is the amount captured in cents, > 0; the account is debited by it (a negative
	// account_transaction amount).
	AmountCents int64 `json:"amountCents"`
}

// OrderCancelled is the JSON body of an OrderCancelled event.
type OrderCancelled struct {
	// EventID is the business event ID.
	EventID string `json:"eventId"`
	// OrderNo is the order number, the aggregate ID.
	OrderNo string `json:"orderNo"`
	// Reason says why the order was cancelled (e.g. "payment timeout").
	Reason string `json:"reason,omitempty"`
}

// body is a decoded event body that can check its own fields.
type body interface {
	// check returns nil, or a permanent error listing the body's problems.
	check() error
}

// decode parses body as JSON into an event of type T (consumer.JSON: fields T does not know are accepted,
// a leading UTF-8 byte-order mark is skipped) and checks it. Errors are permanent: a body that cannot be
// read never will be, so it goes to the DLQ with the reason instead of looping; one that is not JSON wraps
// consumer.ErrUndecodableBody, as in the typed handlers.
func decode[T body](body []byte, eventType string) (T, error) {
	var e T
	if err := (consumer.JSON{}).Decode(body, &e); err != nil {
		return e, retry.Permanent(fmt.Errorf("shop: %s: %w: %w", eventType, consumer.ErrUndecodableBody, err))
	}
	return e, e.check()
}

// checks collects the problems of one decoded body.
type checks []string

// id records a problem when v is not 1..64 characters long (characters, as the VARCHAR(64) columns
// count them: 64 non-ASCII characters fit) or begins or ends with white space.
func (c *checks) id(name, v string) {
	if v == "" || utf8.RuneCountInString(v) > 64 {
		*c = append(*c, name+" must have 1..64 characters")
	}
	if strings.TrimSpace(v) != v {
		// utf8mb4_bin is PAD SPACE in MariaDB: "o1 " would be the same key as "o1".
		*c = append(*c, name+" must not begin or end with white space")
	}
}

// err returns nil, or a permanent error listing the problems of an eventType body.
func (c checks) err(eventType string) error {
	if len(c) == 0 {
		return nil
	}
	return retry.Permanent(fmt.Errorf("shop: invalid %s: %s", eventType, strings.Join(c, "; ")))
}

// Decode parses and validates an OrderCreated body. Errors are permanent (retry.Permanent): a body that
// cannot be read never will be.
func Decode(body []byte) (OrderCreated, error) { return decode[OrderCreated](body, EventOrderCreated) }

// DecodeOrderPaid parses and validates an OrderPaid body. Errors are permanent.
func DecodeOrderPaid(body []byte) (OrderPaid, error) { return decode[OrderPaid](body, EventOrderPaid) }

// DecodePaymentCaptured parses and validates a PaymentCaptured body. Errors are permanent.
func DecodePaymentCaptured(body []byte) (PaymentCaptured, error) {
	return decode[PaymentCaptured](body, EventPaymentCaptured)
}

// DecodeOrderCancelled parses and validates an OrderCancelled body. Errors are permanent.
func DecodeOrderCancelled(body []byte) (OrderCancelled, error) {
	return decode[OrderCancelled](body, EventOrderCancelled)
}

// check validates an OrderCreated: order number and SKU of 1..64 characters, quantity > 0, amount ≥ 0.
func (e OrderCreated) check() error {
	var c checks
	c.id("orderNo", e.OrderNo)
	c.id("skuId", e.SkuID)
	if utf8.RuneCountInString(e.AccountID) > 64 {
		c = append(c, "accountId must have at most 64 characters")
	}
	if e.Quantity <= 0 {
		c = append(c, "quantity must be > 0")
	}
	if e.AmountCents < 0 {
		c = append(c, "amountCents must be ≥ 0")
	}
	return c.err(EventOrderCreated)
}

// check validates an OrderPaid: order number and payment ID of 1..64 characters.
func (e OrderPaid) check() error {
	var c checks
	c.id("orderNo", e.OrderNo)
	c.id("paymentId", e.PaymentID)
	return c.err(EventOrderPaid)
}

// check validates a PaymentCaptured: payment and account IDs of 1..64 characters, an order number of at
// most 64, amount > 0.
func (e PaymentCaptured) check() error {
	var c checks
	c.id("paymentId", e.PaymentID)
	c.id("accountId", e.AccountID)
	if utf8.RuneCountInString(e.OrderNo) > 64 {
		c = append(c, "orderNo must have at most 64 characters")
	}
	if e.AmountCents <= 0 {
		c = append(c, "amountCents must be > 0")
	}
	return c.err(EventPaymentCaptured)
}

// check validates an OrderCancelled: an order number of 1..64 characters.
func (e OrderCancelled) check() error {
	var c checks
	c.id("orderNo", e.OrderNo)
	return c.err(EventOrderCancelled)
}
