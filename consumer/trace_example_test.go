package consumer_test

import (
	"context"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// traceBothEnds is the trace example of docs/operations.md ("Traces"): a producer writes the span of ctx
// into msg's properties, and a consumer reports its spans to tp.
func traceBothEnds(ctx context.Context, msg *primitive.Message, cfg consumer.Config, chain consumer.Handler,
	tp trace.TracerProvider) (*consumer.Consumer, error) {
	// the producer: the span of ctx goes into the message's properties (traceparent, tracestate)
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	for k, v := range carrier {
		msg.WithProperty(k, v)
	}
	// the consumer: one span per message, reported to tp (shut tp down after the consumer)
	c, err := consumer.New(cfg, chain, consumer.WithTracerProvider(tp))
	return c, err
}

// The guide's block is traceBothEnds's body, line for line: the code users copy compiles.
func TestOperationsGuideTraceExampleIsTheCompiledOne(t *testing.T) {
	testenv.DocBlockIsBody(t, "docs/operations.md", "In code ([consumer/trace_example_test.go](../consumer/trace_example_test.go)):",
		"trace_example_test.go", "\ttp trace.TracerProvider) (*consumer.Consumer, error) {\n", "return c, err")
}

// The example's producer half writes the producer span's trace context into the message (its consumer
// half is the one consumer.New; an empty Config stops it before any client is built).
func TestTraceBothEnds_ProducerWritesTraceparent(t *testing.T) {
	tr := newTracing(t)
	ctx, producer := tr.tp.Tracer("producer").Start(context.Background(), "send ORDER")
	defer producer.End()
	msg := primitive.NewMessage("ORDER", nil)

	_, err := traceBothEnds(ctx, msg, consumer.Config{}, handlerReturning(consumer.Processed(), nil), tr.tp)

	var cfgErr *consumer.ConfigError
	require.ErrorAs(t, err, &cfgErr)
	sc := producer.SpanContext()
	assert.Equal(t, "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01", msg.GetProperty("traceparent"))
}
