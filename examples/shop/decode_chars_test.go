package shop_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/examples/shop"
)

// Order numbers, SKUs and accounts are checked in characters, as the VARCHAR(64) columns count them:
// 64 non-ASCII characters (192 bytes) are a valid order number; 65 are not.
func TestDecode_NonASCIIFieldsCountCharacters(t *testing.T) {
	w := newWorld(t)
	w.seed()
	no := w.name(strings.Repeat("订", 64-len([]rune(w.prefix))))
	require.Len(t, []rune(no), 64)
	d := w.delivery(shop.EventOrderCreated, no+"-created", no, 1, shop.OrderCreated{EventID: no + "-created",
		OrderNo: no, AccountID: w.name("acct"), SkuID: w.name("sku"), Quantity: 2, AmountCents: 250})

	o := w.through(w.chain(3), d)
	require.Equal(t, consumer.KindProcessed, o.Kind, "%s", o)
	assert.Equal(t, int64(98), w.onHand())
	assert.Equal(t, int64(1), w.int(`SELECT COUNT(*) FROM orders WHERE order_no = ?`, no))

	_, err := shop.Decode([]byte(`{"orderNo":"` + no + `x","skuId":"s","quantity":1}`))
	require.Error(t, err, "65 characters")
}
