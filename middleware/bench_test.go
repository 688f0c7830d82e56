package middleware_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
)

// benchChain is the standard chain without I/O: everything but Dedup, around a handler that does nothing,
// with deadline (Timeout or Deadline of 5 s) innermost when it is not nil.
func benchChain(b *testing.B, deadline func(time.Duration) middleware.Middleware) consumer.Handler {
	b.Helper()
	m, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	if err != nil {
		b.Fatal(err)
	}
	log := zap.NewNop()
	mws := []middleware.Middleware{testenv.Must(middleware.Metrics(m)), middleware.Logging(log), middleware.Recover(log),
		middleware.Classify(), eventID}
	if deadline != nil {
		mws = append(mws, deadline(5*time.Second))
	}
	return testenv.Must(middleware.Chain(consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil
	}), mws...))
}

func benchMsg() *primitive.MessageExt {
	msg := &primitive.MessageExt{MsgId: "C0A8000100002A9F0000000000000001", Message: primitive.Message{Topic: "ORDER", Body: []byte(`{}`)}}
	msg.WithProperty("EVENT_ID", "evt-1")
	msg.WithKeys([]string{"order-1"})
	msg.WithTag("OrderCreated")
	return msg
}

func benchmarkChain(b *testing.B, deadline func(time.Duration) middleware.Middleware) {
	h := benchChain(b, deadline)
	msg := benchMsg()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		o, err := h.Handle(ctx, testenv.NewDelivery("cg", msg))
		if err != nil || o.Kind != consumer.KindProcessed {
			b.Fatalf("outcome %v, err %v", o, err)
		}
	}
}

// BenchmarkChain_NoIO measures Metrics → Logging (no-op logger) → Recover → Classify → EventID → handler.
// NewDelivery is part of each operation, as in the consumer.
func BenchmarkChain_NoIO(b *testing.B) { benchmarkChain(b, nil) }

// BenchmarkChain_NoIO_WithTimeout adds the Timeout middleware, which runs the rest in a goroutine.
func BenchmarkChain_NoIO_WithTimeout(b *testing.B) { benchmarkChain(b, middleware.Timeout) }

// BenchmarkChain_NoIO_WithDeadline adds the Deadline middleware, which runs the rest inline under a
// context deadline.
func BenchmarkChain_NoIO_WithDeadline(b *testing.B) { benchmarkChain(b, middleware.Deadline) }

// BenchmarkChain_NoIO_UnderHandlerTimeout runs each message under a parent context with a 30 s deadline of
// its own, as the consumer's HandlerTimeout gives it (that context's allocations are counted in every case):
// without a deadline middleware, with Deadline(0) (the parent's deadline alone), with Deadline shorter than
// the parent's (a context of its own), with Deadline longer (the parent's applies: nothing derived) and with
// Timeout.
func BenchmarkChain_NoIO_UnderHandlerTimeout(b *testing.B) {
	for _, bc := range []struct {
		name string
		mw   func() middleware.Middleware // nil: no deadline middleware
	}{
		{"none", nil}, {"Deadline_0", func() middleware.Middleware { return middleware.Deadline(0) }},
		{"Deadline_10s", func() middleware.Middleware { return middleware.Deadline(10 * time.Second) }},
		{"Deadline_1m", func() middleware.Middleware { return middleware.Deadline(time.Minute) }},
		{"Timeout_10s", func() middleware.Middleware { return middleware.Timeout(10 * time.Second) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var deadline func(time.Duration) middleware.Middleware
			if bc.mw != nil {
				deadline = func(time.Duration) middleware.Middleware { return bc.mw() }
			}
			h := benchChain(b, deadline)
			msg := benchMsg()
			b.ReportAllocs()
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				o, err := h.Handle(ctx, testenv.NewDelivery("cg", msg))
				cancel()
				if err != nil || o.Kind != consumer.KindProcessed {
					b.Fatalf("outcome %v, err %v", o, err)
				}
			}
		})
	}
}
