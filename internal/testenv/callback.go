package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
)

// Callback is a consumer whose client callback a test calls itself, with the batch it chooses: the
// consumer (consumer.New, cfg and h, a real store behind h) runs as it does under the RocketMQ client, and
// only the pulling is the test's. Deliver returns what the client would have been told.
type Callback struct {
	c         *consumer.Consumer
	push      *capturePush
	decisions *Decisions
}

// NewCallback returns the Callback of cfg (its first subscription's topic) and h; it is shut down when the
// test ends. cfg.NameServers is set when empty (nothing connects to it).
func NewCallback(t testing.TB, cfg consumer.Config, h consumer.Handler, opts ...consumer.Option) *Callback {
	t.Helper()
	if len(cfg.NameServers) == 0 {
		cfg.NameServers = []string{"127.0.0.1:9876"}
	}
	p := &capturePush{}
	dec := &Decisions{byMsg: map[string][]consumer.Decision{}}
	// A lone dead letter goes to the broker's DLQ (delay level -1) unless the test gives a sink.
	opts = append([]consumer.Option{consumer.WithDeadLetterSink(nil)}, opts...)
	opts = append(opts, consumer.WithObserver(dec),
		consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) { return p, nil }))
	c, err := consumer.New(cfg, h, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	return &Callback{c: c, push: p, decisions: dec}
}

// Deliver calls the callback with msgs as the client would (a concurrent or orderly callback context) and
// returns its result.
func (cb *Callback) Deliver(t testing.TB, orderly bool, msgs ...*primitive.MessageExt) rmq.ConsumeResult {
	t.Helper()
	res, err := cb.Call(t, orderly, msgs...)
	require.NoError(t, err)
	return res
}

// Call is Deliver for a callback that may be left unanswered (the consumer stopping): it returns the
// result and the error the client would get ("rmqguard consumer: stopped" when unanswered, else nil).
func (cb *Callback) Call(t testing.TB, orderly bool, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
	t.Helper()
	ctx := primitive.WithConcurrentlyCtx(context.Background(), primitive.NewConsumeConcurrentlyContext())
	if orderly {
		ctx = primitive.WithOrderlyCtx(context.Background(), primitive.NewConsumeOrderlyContext())
	}
	return cb.call(t, ctx, msgs)
}

// call calls the callback with ctx, the client's callback context, and msgs.
func (cb *Callback) call(t testing.TB, ctx context.Context, msgs []*primitive.MessageExt) (rmq.ConsumeResult, error) {
	t.Helper()
	cb.push.mu.Lock()
	f := cb.push.f
	cb.push.mu.Unlock()
	require.NotNil(t, f, "the consumer subscribed no callback")
	return f(ctx, msgs...)
}

// DelayLevelDLQ is the DelayLevelWhenNextConsume that makes the broker move a message to %DLQ%<group> at
// once.
const DelayLevelDLQ = -1

// Answer is what the client is told about one message of a concurrent consumer: its ConsumeResult and
// the DelayLevelWhenNextConsume the consumer set (0: the broker chooses; DelayLevelDLQ).
type Answer struct {
	Result     rmq.ConsumeResult
	DelayLevel int
}

// AnswerTo returns the Answer of a concurrent consumer (consumer.New, no dead-letter sink) whose handler
// decides o and err for one message delivered alone: the consumer's own answer to what a handler or a
// middleware decided. An unavailable store is waited for 1 ms (Config.OutageWait).
func AnswerTo(t testing.TB, o consumer.Outcome, err error) Answer {
	t.Helper()
	const topic = "TESTENV_ANSWER"
	cfg := consumer.Config{Group: "testenv-answer", Subscriptions: []consumer.Subscription{{Topic: topic}},
		OutageWait: time.Millisecond}
	cb := NewCallback(t, cfg, consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) { return o, err }))
	cc := primitive.NewConsumeConcurrentlyContext()
	msg := &primitive.MessageExt{MsgId: Unique("answer"), Message: primitive.Message{Topic: topic}}
	res, cerr := cb.call(t, primitive.WithConcurrentlyCtx(context.Background(), cc), []*primitive.MessageExt{msg})
	require.NoError(t, cerr)
	return Answer{Result: res, DelayLevel: cc.DelayLevelWhenNextConsume}
}

// Shutdown shuts the consumer down (consumer.Consumer.Shutdown), e.g. while Deliver runs on another
// goroutine; Deliver then fails the test unless the callback was answered.
func (cb *Callback) Shutdown(ctx context.Context) error { return cb.c.Shutdown(ctx) }

// Decisions returns the final decisions the consumer reported for msgID, in order.
func (cb *Callback) Decisions(msgID string) []consumer.Decision { return cb.decisions.of(msgID) }

// capturePush is a irmq.PushConsumer that keeps the callback and pulls nothing.
type capturePush struct {
	mu sync.Mutex
	f  func(context.Context, ...*primitive.MessageExt) (rmq.ConsumeResult, error)
}

func (p *capturePush) Start() error                       { return nil }
func (p *capturePush) Shutdown() error                    { return nil }
func (p *capturePush) Suspend()                           {}
func (p *capturePush) Resume()                            {}
func (p *capturePush) GetOffsetDiffMap() map[string]int64 { return nil }
func (p *capturePush) Subscribe(_ string, _ rmq.MessageSelector,
	f func(context.Context, ...*primitive.MessageExt) (rmq.ConsumeResult, error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.f = f
	return nil
}

// Decisions is a consumer.Observer that records the decisions by message ID.
type Decisions struct {
	mu    sync.Mutex
	byMsg map[string][]consumer.Decision
}

// Decided records dec.
func (o *Decisions) Decided(d *consumer.Delivery, dec consumer.Decision) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.byMsg[d.Msg.MsgId] = append(o.byMsg[d.Msg.MsgId], dec)
}

func (o *Decisions) of(msgID string) []consumer.Decision {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]consumer.Decision(nil), o.byMsg[msgID]...)
}

// InFlight does nothing.
func (o *Decisions) InFlight(string, int) {}

// Lag does nothing.
func (o *Decisions) Lag(string, string, int64) {}

// Paused does nothing.
func (o *Decisions) Paused(string, string) {}

// Unpaused does nothing.
func (o *Decisions) Unpaused(string, time.Duration) {}
