package consumer

import (
	"context"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The carrier over a message's properties: TraceContext writes traceparent and tracestate as properties
// (beside the message's own, which stay), reads back the same span context, and lists every property.
func TestPropertyCarrier_TraceContextRoundTripsThroughMessageProperties(t *testing.T) {
	ts, err := trace.ParseTraceState("vendor=abc")
	require.NoError(t, err)
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		TraceState: ts,
	})
	msg := primitive.NewMessage("ORDER", []byte(`{}`))
	msg.WithProperty("EVENT_ID", "e-1")
	carrier := propertyCarrier{msg: msg}

	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)

	assert.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", msg.GetProperty("traceparent"))
	assert.Equal(t, "vendor=abc", msg.GetProperty("tracestate"))
	assert.Equal(t, "e-1", msg.GetProperty("EVENT_ID"), "the message's own properties stay")
	assert.ElementsMatch(t, []string{"EVENT_ID", "traceparent", "tracestate"}, carrier.Keys())

	got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
	assert.True(t, got.IsRemote(), "extracted: the producer's span, in another process")
	assert.True(t, got.Equal(sc.WithRemote(true)), "the same trace ID, span ID, flags and state: %v", got)
}

// A message without trace context (or with a malformed one) yields no span context: its span is a root.
func TestPropertyCarrier_MissingOrMalformedTraceparentExtractsNothing(t *testing.T) {
	for name, tp := range map[string]string{"missing": "", "malformed": "00-not-a-trace"} {
		t.Run(name, func(t *testing.T) {
			msg := primitive.NewMessage("ORDER", nil)
			msg.WithProperty("traceparent", tp)
			ctx := propagation.TraceContext{}.Extract(context.Background(), propertyCarrier{msg: msg})
			assert.False(t, trace.SpanContextFromContext(ctx).IsValid())
		})
	}
}
