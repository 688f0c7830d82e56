package shop_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/retry"
)

// F27: the example handler reads a body that starts with a UTF-8 byte-order mark.
func TestDecode_F27_BodyWithUTF8BOM(t *testing.T) {
	body := "\xEF\xBB\xBF" + `{"eventId":"e-1","orderNo":"o-1","skuId":"sku-1","quantity":2,"amountCents":1250}`

	e, err := shop.Decode([]byte(body))

	require.NoError(t, err)
	assert.Equal(t, shop.OrderCreated{EventID: "e-1", OrderNo: "o-1", SkuID: "sku-1", Quantity: 2, AmountCents: 1250}, e)
}

// Producers evolve: a field the event type does not know is ignored.
func TestDecode_UnknownFieldIsAccepted(t *testing.T) {
	e, err := shop.Decode([]byte(`{"orderNo":"o-1","skuId":"s","quantity":1,"colour":"red","gift":{"wrap":true}}`))

	require.NoError(t, err)
	assert.Equal(t, shop.OrderCreated{OrderNo: "o-1", SkuID: "s", Quantity: 1}, e)
}

func TestDecode_InvalidBodyIsPermanent(t *testing.T) {
	for name, body := range map[string]string{
		"not json":    `not json`,
		"no quantity": `{"orderNo":"o-1","skuId":"s"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := shop.Decode([]byte(body))
			require.Error(t, err)
			assert.Equal(t, retry.ClassPermanent, retry.Classify(err), "an unreadable body goes to the DLQ at once: %v", err)
		})
	}
}
