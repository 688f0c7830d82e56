package shop_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/examples/shop"
)

// An OrderCreated from a producer that added a field is applied once through the example's chain (the
// typed handler ignores the field); a redelivery is a duplicate.
func TestTyped_OrderCreatedWithAnExtraFieldIsProcessed(t *testing.T) {
	w := newWorld(t)
	w.seed()
	d := w.created("o1", 3)
	d.Msg.Body = []byte(strings.Replace(string(d.Msg.Body), "{", `{"loyaltyPoints":42,"channel":{"app":"ios"},`, 1))
	h := w.chain(3)

	o := w.through(h, d)

	require.Equal(t, consumer.KindProcessed, o.Kind, "%s", o)
	status, version := w.order("o1")
	assert.Equal(t, shop.StatusWaitPay, status)
	assert.Equal(t, shop.VersionCreated, version)
	assert.Equal(t, int64(97), w.onHand())
	d.Attempt = 1
	assert.Equal(t, consumer.KindDuplicate, w.through(h, d).Kind)
	assert.Equal(t, int64(97), w.onHand(), "applied once")
}

// A body that is not JSON is dead-lettered at once, on every delivery, with the reason "undecodable body: …",
// and leaves no processed_event row and no order; so is one whose type is not known to CheckOrderAggregate
// (PaymentCaptured), which only the handler decodes.
func TestTyped_BodyThatIsNotJSONIsDeadLetteredWithTheReason(t *testing.T) {
	w := newWorld(t)
	w.seed()
	for _, d := range []*consumer.Delivery{w.created("o1", 1), w.captured("p1", "e-cap", 100)} {
		d.Msg.Body = []byte(`<order no="1"/>`)
		for attempt := range 2 {
			d.Attempt = attempt
			o := w.through(w.chain(3), d)
			assert.Equal(t, consumer.KindDeadLetter, o.Kind, "%s attempt %d: %s", d.EventType, attempt, o)
			assert.True(t, strings.HasPrefix(o.Reason, "undecodable body: invalid character '<'"), "%s: %q", d.EventType, o.Reason)
			assert.Equal(t, "permanent", o.Cause)
		}
		assert.Zero(t, w.int(`SELECT COUNT(*) FROM processed_event WHERE consumer_group = ? AND event_id = ?`, w.group, d.EventID))
	}
	assert.Zero(t, w.int(`SELECT COUNT(*) FROM orders WHERE order_no = ?`, w.name("o1")))
	assert.Equal(t, int64(100), w.onHand())
	assert.Equal(t, int64(10_000), w.balance())
}
