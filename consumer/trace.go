package consumer

// Trace context (WithTracerProvider): each message's span starts when its callback enters (startSpans), is
// the parent of its handler's context (handleOne), and ends once, at its decision (report) or unanswered
// at shutdown (endUnanswered). The rules: the package doc, "Traces".

import (
	"context"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// WithTracerProvider starts one span per message with tp, kind Consumer, the child of the W3C trace context
// (traceparent, tracestate) in the message's properties, in the handler's context; it ends at the message's
// final decision. Default: no spans, and properties are not read. See the package doc, "Traces".
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) {
		o.tracer = nil
		if tp != nil {
			o.tracer = tp.Tracer(tracerName, trace.WithSchemaURL(semconv.SchemaURL))
		}
	}
}

// tracerName is the instrumentation scope of the consumer's spans.
const tracerName = "github.com/rmqguard/rmqguard/consumer"

// The span attributes of rmqguard's own (the messaging ones are semconv's).
const (
	attrOutcome      = attribute.Key("rmqguard.outcome")
	attrCause        = attribute.Key("rmqguard.cause")
	attrEventID      = attribute.Key("rmqguard.event_id")
	attrAttempt      = attribute.Key("rmqguard.attempt")
	attrBatchRetried = attribute.Key("rmqguard.batch_retried")
	attrUnanswered   = attribute.Key("rmqguard.unanswered")
)

// operationProcess is the messaging operation of a consumer's span (messaging.operation.name).
const operationProcess = "process"

// propertyCarrier is the propagation.TextMapCarrier over a message's properties.
type propertyCarrier struct{ msg *primitive.Message }

// Get returns the property key, "" when absent.
func (c propertyCarrier) Get(key string) string { return c.msg.GetProperty(key) }

// Set sets the property key (the client ignores an empty key or value).
func (c propertyCarrier) Set(key, value string) { c.msg.WithProperty(key, value) }

// Keys returns the names of the message's properties.
func (c propertyCarrier) Keys() []string {
	props := c.msg.GetProperties()
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	return keys
}

// startSpans starts the span of each message of a callback (nil without WithTracerProvider): the child of
// the trace context its properties carry (a root span when they carry none), named "process <topic>".
func (c *Consumer) startSpans(msgs []*primitive.MessageExt) []trace.Span {
	if c.tracer == nil {
		return nil
	}
	spans := make([]trace.Span, len(msgs))
	for i, msg := range msgs {
		d := newNamespacedDelivery(c.cfg, msg)
		parent := propagation.TraceContext{}.Extract(context.Background(), propertyCarrier{msg: &msg.Message})
		attrs := []attribute.KeyValue{
			semconv.MessagingSystemRocketMQ,
			semconv.MessagingDestinationName(d.Topic),
			semconv.MessagingConsumerGroupName(d.Group),
			semconv.MessagingMessageID(msg.MsgId),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName(operationProcess),
			attrAttempt.Int(d.Attempt),
		}
		if d.Namespace != "" {
			attrs = append(attrs, semconv.MessagingRocketMQNamespace(d.Namespace))
		}
		_, spans[i] = c.tracer.Start(parent, operationProcess+" "+d.Topic,
			trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
	}
	return spans
}

// endSpan ends the span of d with its final decision: the outcome and its cause, the event ID when known,
// and status Error, with the reason, when the message was not acknowledged as done (retried, dead-lettered,
// unavailable, unset).
func endSpan(span trace.Span, d *Delivery, dec Decision) {
	o := dec.Outcome
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, attrOutcome.String(o.Kind.String()))
	if o.Cause != "" {
		attrs = append(attrs, attrCause.String(o.Cause))
	}
	if d.EventID != "" {
		attrs = append(attrs, attrEventID.String(d.EventID))
	}
	if dec.BatchRetried {
		attrs = append(attrs, attrBatchRetried.Bool(true))
	}
	span.SetAttributes(attrs...)
	if !o.Kind.Acknowledges() || o.Kind == KindDeadLettered {
		span.SetStatus(codes.Error, failureReason(o, dec.Err))
	}
	span.End()
}

// endUnanswered ends the spans of a callback the consumer does not answer (shutting down: see consume),
// marked rmqguard.unanswered; the messages come back after a restart.
func endUnanswered(spans []trace.Span) {
	for _, s := range spans {
		s.SetAttributes(attrUnanswered.Bool(true))
		s.End()
	}
}
