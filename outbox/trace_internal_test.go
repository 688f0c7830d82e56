package outbox

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/trace"
)

// Send's trace context: the span of ctx goes into a copy of the message's properties as traceparent (and
// tracestate); the caller's map is not changed, a traceparent the caller set stands, and without a span
// the properties are the caller's own.
func TestWithTraceContext_AddsTheSpanOfCtxUnlessTheCallerSetOne(t *testing.T) {
	ts, err := trace.ParseTraceState("vendor=abc")
	assert.NoError(t, err)
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled, TraceState: ts,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	props := map[string]string{"origin": "loyalty"}

	got := withTraceContext(ctx, props)

	assert.Equal(t, map[string]string{"origin": "loyalty", "traceparent": "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01",
		"tracestate": "vendor=abc"}, got)
	assert.Equal(t, map[string]string{"origin": "loyalty"}, props, "the caller's map is not changed")
	assert.Equal(t, map[string]string{"traceparent": "00-caller"}, withTraceContext(ctx, map[string]string{"traceparent": "00-caller"}),
		"the caller's trace context stands")
	assert.Equal(t, props, withTraceContext(context.Background(), props), "no span: nothing added")
	assert.Nil(t, withTraceContext(context.Background(), nil))
	assert.Len(t, withTraceContext(ctx, nil), 2, "a message without properties gets the trace context")
}
