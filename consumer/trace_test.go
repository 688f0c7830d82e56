package consumer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rmqguard/rmqguard/consumer"
)

// tracing is an in-memory TracerProvider and what it recorded.
type tracing struct {
	tp       *sdktrace.TracerProvider
	recorder *tracetest.SpanRecorder
}

func newTracing(t *testing.T) *tracing {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &tracing{tp: tp, recorder: rec}
}

// produced returns orderMsg(key) with the trace context of a new producer span injected into its
// properties, as a traced producer sends it, and that span's context.
func (tr *tracing) produced(key string) (*primitive.MessageExt, trace.SpanContext) {
	ctx, span := tr.tp.Tracer("producer").Start(context.Background(), "send ORDER", trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	msg := orderMsg(key)
	props := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, props)
	for k, v := range props {
		msg.WithProperty(k, v)
	}
	return msg, span.SpanContext()
}

// consumerSpans returns the ended spans of kind Consumer.
func (tr *tracing) consumerSpans() []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.recorder.Ended() {
		if s.SpanKind() == trace.SpanKindConsumer {
			out = append(out, s)
		}
	}
	return out
}

// attrs returns a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// Without WithTracerProvider no span is started and the trace context is not read: the handler's context
// has no span context although the message carries one, and the message's properties are as they came.
func TestTrace_WithoutProviderNoSpanAndPropertiesUntouched(t *testing.T) {
	tr := newTracing(t)
	msg, _ := tr.produced("o-1")
	before := msg.GetProperties()
	var inHandler trace.SpanContext
	_, fp := newConsumer(t, validConfig(), consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		inHandler = trace.SpanContextFromContext(ctx)
		return consumer.Processed(), nil
	}))

	res, _ := fp.deliver(t, "ORDER", msg)

	assert.Equal(t, rmq.ConsumeSuccess, res)
	assert.False(t, inHandler.IsValid(), "no span, and no extracted remote context either: %v", inHandler)
	assert.Equal(t, before, msg.GetProperties())
}

// With a provider, a message's span is the child of the producer's span its properties carry, kind Consumer,
// with the messaging attributes, and it is the span of the handler's context; it ends at the decision with
// the outcome and the event ID.
func TestTrace_SpanIsTheChildOfTheProducersSpanAndEndsWithTheDecision(t *testing.T) {
	tr := newTracing(t)
	msg, producer := tr.produced("o-1")
	var inHandler trace.SpanContext
	_, fp := newConsumer(t, validConfig(), withEventID(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		inHandler = trace.SpanContextFromContext(ctx)
		return consumer.Processed(), nil
	})), consumer.WithTracerProvider(tr.tp))

	res, _ := fp.deliver(t, "ORDER", msg)

	require.Equal(t, rmq.ConsumeSuccess, res)
	spans := tr.consumerSpans()
	require.Len(t, spans, 1)
	s := spans[0]
	assert.Equal(t, producer.TraceID(), s.SpanContext().TraceID(), "the producer's trace")
	assert.Equal(t, producer.SpanID(), s.Parent().SpanID(), "the producer's span is the parent")
	assert.True(t, s.Parent().IsRemote())
	assert.Equal(t, s.SpanContext(), inHandler, "the handler runs in the consumer's span")
	assert.Equal(t, "process ORDER", s.Name())
	a := attrs(s)
	assert.Equal(t, "rocketmq", a["messaging.system"].AsString())
	assert.Equal(t, "ORDER", a["messaging.destination.name"].AsString())
	assert.Equal(t, "cg", a["messaging.consumer.group.name"].AsString())
	assert.Equal(t, "msg-o-1", a["messaging.message.id"].AsString())
	assert.Equal(t, "process", a["messaging.operation.type"].AsString())
	assert.Equal(t, "processed", a["rmqguard.outcome"].AsString())
	assert.Equal(t, "e-o-1", a["rmqguard.event_id"].AsString())
	assert.Equal(t, codes.Unset, s.Status().Code)
	assert.Equal(t, msg.GetProperty("traceparent"), "00-"+producer.TraceID().String()+"-"+producer.SpanID().String()+"-01",
		"the consumer does not write the message's trace context")
}

// A retry and a dead letter end their spans with status Error and the reason; the outcome is the final
// one (dead_lettered once the consumer published the letter), the attempt the delivery's.
func TestTrace_RetryAndDeadLetterEndWithErrorStatusAndTheFinalOutcome(t *testing.T) {
	for name, tc := range map[string]struct {
		outcome consumer.Outcome
		err     error
		attempt int32
		want    string
		reason  string
	}{
		"retry":       {err: errors.New("db down"), attempt: 2, want: "retry", reason: "db down"},
		"dead letter": {outcome: consumer.DeadLetter("poison"), want: "dead_lettered", reason: "poison"},
	} {
		t.Run(name, func(t *testing.T) {
			tr := newTracing(t)
			p := &fakeProducer{status: primitive.SendOK}
			msg, producer := tr.produced("o-1")
			msg.ReconsumeTimes = tc.attempt
			_, fp := newConsumer(t, validConfig(), handlerReturning(tc.outcome, tc.err), consumer.WithTracerProvider(tr.tp), withProducer(p))

			fp.deliver(t, "ORDER", msg)

			spans := tr.consumerSpans()
			require.Len(t, spans, 1)
			s := spans[0]
			assert.Equal(t, producer.SpanID(), s.Parent().SpanID())
			assert.Equal(t, tc.want, attrs(s)["rmqguard.outcome"].AsString())
			assert.Equal(t, int64(tc.attempt), attrs(s)["rmqguard.attempt"].AsInt64())
			assert.Equal(t, codes.Error, s.Status().Code)
			assert.Equal(t, tc.reason, s.Status().Description)
		})
	}
}

// Each member of a batch has its own span, the child of its own producer span, ended once with its own
// outcome, also when the batch is retried as a whole.
func TestTrace_EachBatchMemberHasItsOwnSpan(t *testing.T) {
	tr := newTracing(t)
	m1, p1 := tr.produced("b-1")
	m2, p2 := tr.produced("b-2")
	_, fp := newBatchConsumer(t, consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetKeys() == "b-2" {
			return consumer.Retry(0, "b-2 not yet"), nil
		}
		return consumer.Processed(), nil
	}), consumer.WithTracerProvider(tr.tp))

	res, _ := fp.deliver(t, "ORDER", m1, m2)

	assert.Equal(t, rmq.ConsumeRetryLater, res)
	spans := tr.consumerSpans()
	require.Len(t, spans, 2, "one span per member, ended once")
	byParent := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byParent[s.Parent().SpanID()] = s
	}
	require.Contains(t, byParent, p1.SpanID())
	require.Contains(t, byParent, p2.SpanID())
	assert.Equal(t, "processed", attrs(byParent[p1.SpanID()])["rmqguard.outcome"].AsString())
	assert.True(t, attrs(byParent[p1.SpanID()])["rmqguard.batch_retried"].AsBool(), "acknowledged alone, retried with its batch")
	assert.Equal(t, "retry", attrs(byParent[p2.SpanID()])["rmqguard.outcome"].AsString())
	assert.Equal(t, codes.Error, byParent[p2.SpanID()].Status().Code)
}

// A delivery the consumer leaves unanswered at shutdown (its handler cancelled at the drain timeout) ends its
// span once, marked rmqguard.unanswered and without an outcome: no decision was made.
func TestTrace_UnansweredAtShutdownEndsTheSpanMarkedUnanswered(t *testing.T) {
	tr := newTracing(t)
	b := newBlockingHandler()
	cfg := validConfig()
	cfg.DrainTimeout = 50 * time.Millisecond
	c, fp := newConsumer(t, cfg, consumer.HandlerFunc(b.handle), consumer.WithTracerProvider(tr.tp))
	b.fp = fp
	msg, producer := tr.produced("o-1")
	result := deliverAsync(fp, "ORDER", msg)
	require.Equal(t, "o-1", <-b.started)

	require.ErrorIs(t, c.Shutdown(context.Background()), context.DeadlineExceeded)

	require.ErrorIs(t, (<-result).err, consumer.ErrStopped)
	spans := tr.consumerSpans()
	require.Len(t, spans, 1)
	assert.Equal(t, producer.SpanID(), spans[0].Parent().SpanID())
	a := attrs(spans[0])
	assert.True(t, a["rmqguard.unanswered"].AsBool())
	assert.NotContains(t, a, attribute.Key("rmqguard.outcome"))
}
