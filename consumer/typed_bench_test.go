package consumer_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rmqguard/rmqguard/consumer"
)

// BenchmarkHandleJSON compares consumer.HandleJSON with the same handler decoding its body by hand with
// json.Unmarshal: the cost of the typed handler over what a user would write. No I/O.
func BenchmarkHandleJSON(b *testing.B) {
	body := `{"paymentId":"p-1","amountCents":1250,"currency":"EUR"}`
	use := func(p payment) (consumer.Outcome, error) {
		if p.AmountCents != 1250 {
			b.Fatalf("decoded %+v", p)
		}
		return consumer.Processed(), nil
	}
	run := func(b *testing.B, h consumer.Handler) {
		d := typedDelivery(body)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := h.Handle(ctx, d); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("typed", func(b *testing.B) {
		run(b, consumer.HandleJSON(func(_ context.Context, _ *consumer.Delivery, p payment) (consumer.Outcome, error) {
			return use(p)
		}))
	})
	b.Run("by-hand", func(b *testing.B) {
		run(b, consumer.HandlerFunc(func(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			var p payment
			if err := json.Unmarshal(d.Msg.Body, &p); err != nil {
				return consumer.DeadLetter(err.Error()), err
			}
			return use(p)
		}))
	})
}
