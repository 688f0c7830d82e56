package e2e

import (
	"context"
	"errors"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/outbox"
	"github.com/rmqguard/rmqguard/retry"
	"github.com/rmqguard/rmqguard/topics"
)

// The trace tests: a producer's span, injected into the message's properties as a traced producer does
// (W3C traceparent), is the parent of the consumer's span on the real broker, across a retry, an outbox hop
// (the relay's message continues the trace of the handling that sent it) and a DLQ replay. Acceptance: the
// trace part of the console-and-traces work (no case ID yet).

// traces is an in-memory TracerProvider shared by a test's producer and consumers.
type traces struct {
	tp  *sdktrace.TracerProvider
	rec *tracetest.SpanRecorder
}

func newTraces(t *testing.T) *traces {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &traces{tp: tp, rec: rec}
}

// produced starts and ends a producer span, injects its trace context into msg's properties with
// propagation.TraceContext, and returns the span's context.
func (tr *traces) produced(msg *primitive.Message) trace.SpanContext {
	ctx, span := tr.tp.Tracer("e2e-producer").Start(context.Background(), "send "+msg.Topic, trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	for k, v := range carrier {
		msg.WithProperty(k, v)
	}
	return span.SpanContext()
}

// consumed returns the ended consumer spans of group, ordered by start time.
func (tr *traces) consumed(group string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tr.rec.Ended() {
		if s.SpanKind() == trace.SpanKindConsumer && spanAttr(s, "messaging.consumer.group.name") == group {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartTime().Before(out[j].StartTime()) })
	return out
}

// waitConsumed waits until group has ended n consumer spans, and returns them.
func (tr *traces) waitConsumed(t *testing.T, group string, n int, within time.Duration) []sdktrace.ReadOnlySpan {
	t.Helper()
	require.Eventually(t, func() bool { return len(tr.consumed(group)) >= n }, within, 100*time.Millisecond,
		"group %s ended fewer than %d consumer spans", group, n)
	return tr.consumed(group)
}

// spanAttr returns the string value of attribute key of s, "" when absent.
func spanAttr(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// requireChildOf requires s to be in parent's trace with parent as its parent span.
func requireChildOf(t *testing.T, parent trace.SpanContext, s sdktrace.ReadOnlySpan, what string) {
	t.Helper()
	require.Equal(t, parent.TraceID(), s.SpanContext().TraceID(), "%s: the same trace", what)
	require.Equal(t, parent.SpanID(), s.Parent().SpanID(), "%s: the parent span", what)
}

// A handler that fails the first delivery: the broker delivers the message again through %RETRY%<group>,
// its properties with it, and both deliveries' spans are children of the producer's span; the first ends
// with status Error and outcome retry, the second processed.
func TestTrace_ProducerSpanIsTheParentOfEveryDeliveryAcrossARetry(t *testing.T) {
	w := newWorld(t, 1)
	tr := newTraces(t)
	h := consumer.HandlerFunc(func(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Attempt == 0 {
			return consumer.Outcome{}, errors.New("first delivery fails")
		}
		return consumer.Processed(), nil
	})
	w.start(consumer.Config{MaxAttempts: 3, DrainTimeout: 5 * time.Second}, h, consumer.WithTracerProvider(tr.tp),
		consumer.WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))))

	msg := primitive.NewMessage(w.topic, []byte(`{}`))
	msg.WithProperty("EVENT_ID", w.run+"-1")
	producer := tr.produced(msg)
	w.send(msg)

	spans := tr.waitConsumed(t, w.group, 2, 60*time.Second)
	require.Len(t, spans, 2, "two deliveries, one span each")
	for i, s := range spans {
		requireChildOf(t, producer, s, "delivery "+spanAttr(s, "rmqguard.attempt"))
		assert.Equal(t, w.topic, spanAttr(s, "messaging.destination.name"), "the original topic, also on %%RETRY%%")
		assert.Equal(t, []string{"0", "1"}[i], spanAttr(s, "rmqguard.attempt"))
	}
	assert.Equal(t, "retry", spanAttr(spans[0], "rmqguard.outcome"))
	assert.Equal(t, codes.Error, spans[0].Status().Code)
	assert.Equal(t, "first delivery fails", spans[0].Status().Description)
	assert.Equal(t, "processed", spanAttr(spans[1], "rmqguard.outcome"))
	assert.Equal(t, codes.Unset, spans[1].Status().Code)
}

// Group A's handler sends a message through the outbox; the relay (in A's process) sends it after the
// commit; group B's span is in the producer's trace, its parent the span of A's handling, whose parent
// is the producer's span.
func TestTrace_OutboxMessageContinuesTheTraceOfTheHandlingThatSentIt(t *testing.T) {
	f := newFixture(t)
	tr := newTraces(t)
	ob := f.outbox(outbox.Config{})
	broker := testenv.Broker(t)
	inTopic := f.topic + "_IN"
	require.NoError(t, irmq.EnsureTopic(f.ctx, f.ns, broker, inTopic, 1))
	groupA, groupB := "trace-a-"+f.run, "trace-b-"+f.run
	for _, g := range []string{groupA, groupB} {
		require.NoError(t, irmq.EnsureGroupTopics(f.ctx, f.ns, broker, g))
	}
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	forward := func(ctx context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		_, err := ob.Send(ctx, d, outbox.Message{Name: "forwarded", Topic: f.topic, Body: d.Msg.Body})
		return consumer.Processed(), err
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	chainA := testenv.Must(middleware.Chain(dedup.Handle(forward), middleware.Recover(log), middleware.Classify(), eventID,
		testenv.Must(middleware.Dedup(f.store))))
	start := func(group, topic string, h consumer.Handler, opts ...consumer.Option) {
		c, err := consumer.New(consumer.Config{NameServers: f.ns, Group: group, InstanceName: group, DrainTimeout: 5 * time.Second,
			Subscriptions: []consumer.Subscription{{Topic: topic}}, StartFromFirstOffset: true},
			h, append(opts, consumer.WithTracerProvider(tr.tp), consumer.WithLogger(log))...)
		require.NoError(t, err)
		require.NoError(t, c.Start())
		t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	}
	start(groupA, inTopic, chainA, consumer.WithBackground(ob.Run))
	start(groupB, f.topic, consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		return consumer.Processed(), nil
	}))

	prod, err := irmq.StartProducer(f.ns, groupA+"-producer")
	require.NoError(t, err)
	t.Cleanup(func() { _ = prod.Shutdown() })
	msg := primitive.NewMessage(inTopic, []byte(`{"n":1}`))
	msg.WithProperty("EVENT_ID", f.run+"-1")
	producer := tr.produced(msg)
	res, err := prod.SendSync(f.ctx, msg)
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, res.Status)

	a := tr.waitConsumed(t, groupA, 1, 60*time.Second)[0]
	b := tr.waitConsumed(t, groupB, 1, 60*time.Second)[0]
	requireChildOf(t, producer, a, "group A's handling")
	assert.Equal(t, "processed", spanAttr(a, "rmqguard.outcome"))
	assert.Equal(t, f.run+"-1", spanAttr(a, "rmqguard.event_id"))
	requireChildOf(t, a.SpanContext(), b, "group B's handling of the outbox message")
	assert.Equal(t, f.topic, spanAttr(b, "messaging.destination.name"))
	assert.Equal(t, "processed", spanAttr(b, "rmqguard.outcome"))
}

// A message dead-lettered by the consumer (its letter keeps traceparent) and replayed with the replay
// engine of `rmqguard dlq replay` (the replay keeps it too): the replayed delivery's span, like the
// dead-lettered one's, is a child of the producer's span.
func TestTrace_ReplayedDeliveryIsAChildOfTheProducersSpan(t *testing.T) {
	w := newWorld(t, 1)
	tr := newTraces(t)
	db := shoptest.MySQL(t)
	_, err := dlq.Migrate(w.ctx, db.DB)
	require.NoError(t, err)
	store, err := dedup.NewStore(db)
	require.NoError(t, err)
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	var bug atomic.Bool
	bug.Store(true)
	business := func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		if bug.Load() {
			return consumer.Outcome{}, retry.Permanent(errors.New("bug: unknown SKU"))
		}
		return consumer.Processed(), nil
	}
	handler := testenv.Must(middleware.Chain(dedup.Handle(business), middleware.Recover(log), middleware.Classify(), eventID,
		testenv.Must(middleware.Dedup(store))))
	w.start(consumer.Config{MaxAttempts: 2, DrainTimeout: 5 * time.Second}, handler, consumer.WithTracerProvider(tr.tp),
		consumer.WithLogger(log))

	msg := primitive.NewMessage(w.topic, []byte(`{}`))
	msg.WithProperty("EVENT_ID", w.run+"-1")
	producer := tr.produced(msg)
	w.send(msg)
	dead := tr.waitConsumed(t, w.group, 1, 60*time.Second)[0]
	requireChildOf(t, producer, dead, "the dead-lettered delivery")
	assert.Equal(t, "dead_lettered", spanAttr(dead, "rmqguard.outcome"))
	assert.Equal(t, codes.Error, dead.Status().Code)

	bug.Store(false)
	var letters []dlqtool.Letter
	require.Eventually(t, func() bool {
		scan, err := dlqtool.Scan(w.ctx, topics.Cluster{NameServers: w.ns}, w.group, dlqtool.ScanOptions{})
		letters = scan.Letters
		return err == nil && len(letters) == 1
	}, 30*time.Second, 200*time.Millisecond, "the letter is in %%DLQ%%%s", w.group)
	assert.Equal(t, msg.GetProperty("traceparent"), letters[0].Properties["traceparent"], "the letter keeps the trace context")
	audit, err := dlqtool.NewMySQLAudit(db)
	require.NoError(t, err)
	processed, err := dlqtool.NewMySQLProcessed(db)
	require.NoError(t, err)
	rep, err := dlqtool.Replay(w.ctx, letters, dlqtool.ReplayOptions{Group: w.group, Operator: "trace-e2e", Sender: w.prod,
		Audit: audit, Processed: processed})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Summary.Sent, "%+v", rep.Summary)

	spans := tr.waitConsumed(t, w.group, 2, 60*time.Second)
	replayed := spans[1]
	requireChildOf(t, producer, replayed, "the replayed delivery")
	assert.Equal(t, "processed", spanAttr(replayed, "rmqguard.outcome"))
	assert.Equal(t, w.topic, spanAttr(replayed, "messaging.destination.name"), "the origin topic")
	assert.Equal(t, w.run+"-1", spanAttr(replayed, "rmqguard.event_id"))
}
