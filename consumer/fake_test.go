package consumer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rmqguard/rmqguard/consumer"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
)

// TestMain fails the package when a test leaves a goroutine behind (e.g. Shutdown's drain watcher).
// The RocketMQ client starts a go-cache janitor in a package init; it is not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"))
}

type callback = func(context.Context, ...*primitive.MessageExt) (rmq.ConsumeResult, error)

// fakePush is a irmq.PushConsumer that records calls and captures the Subscribe callbacks.
type fakePush struct {
	mu            sync.Mutex
	calls         []string
	subscribed    map[string]rmq.MessageSelector
	callbacks     map[string]callback
	subErr        error
	startErr      error
	shutdownErr   error
	shutdownPanic any
	suspended     chan struct{} // closed by the first Suspend
	lag           map[string]int64
	lagReads      int
}

func newFakePush() *fakePush {
	return &fakePush{subscribed: map[string]rmq.MessageSelector{}, callbacks: map[string]callback{}, suspended: make(chan struct{})}
}

func (f *fakePush) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakePush) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakePush) Start() error { f.record("start"); return f.startErr }
func (f *fakePush) Shutdown() error {
	f.record("shutdown")
	if f.shutdownPanic != nil {
		panic(f.shutdownPanic)
	}
	return f.shutdownErr
}
func (f *fakePush) Suspend() {
	f.record("suspend")
	select {
	case <-f.suspended:
	default:
		close(f.suspended)
	}
}

func (f *fakePush) Resume() { f.record("resume") }

// GetOffsetDiffMap returns a copy of the lag set by setLag.
func (f *fakePush) GetOffsetDiffMap() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lagReads++
	out := make(map[string]int64, len(f.lag))
	for k, v := range f.lag {
		out[k] = v
	}
	return out
}

// setLag sets what GetOffsetDiffMap returns.
func (f *fakePush) setLag(lag map[string]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lag = lag
}

func (f *fakePush) Subscribe(topic string, sel rmq.MessageSelector, cb callback) error {
	f.record("subscribe " + topic)
	if f.subErr != nil {
		return f.subErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subscribed[topic] = sel
	f.callbacks[topic] = cb
	return nil
}

// deliver invokes topic's callback as the client would, with a fresh ConsumeConcurrentlyContext, and
// returns the result and the DelayLevelWhenNextConsume the callback left on the context.
func (f *fakePush) deliver(t *testing.T, topic string, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, int) {
	t.Helper()
	f.mu.Lock()
	cb, ok := f.callbacks[topic]
	f.mu.Unlock()
	require.True(t, ok, "no callback subscribed for %s", topic)
	cc := primitive.NewConsumeConcurrentlyContext()
	res, err := cb(primitive.WithConcurrentlyCtx(context.Background(), cc), msgs...)
	require.NoError(t, err, "the callback's error is only logged by the client; the result must carry the decision")
	return res, cc.DelayLevelWhenNextConsume
}

// fakeObserver records what the consumer reports.
type fakeObserver struct {
	mu           sync.Mutex
	paused       []string
	unpaused     []time.Duration
	unsubscribed []string                       // group/topic of each message decided unsubscribed
	decided      map[string][]consumer.Decision // msg ID → decisions, in order
	inFlight     int
	maxInFlight  int
	lag          map[string]int64 // group/topic → last reported lag
	lagReports   int
}

func (o *fakeObserver) Paused(group, reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.paused = append(o.paused, group+": "+reason)
}

func (o *fakeObserver) Unpaused(group string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.unpaused = append(o.unpaused, d)
}

func (o *fakeObserver) counts() (paused, unpaused int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.paused), len(o.unpaused)
}

func (o *fakeObserver) Decided(d *consumer.Delivery, dec consumer.Decision) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.decided == nil {
		o.decided = map[string][]consumer.Decision{}
	}
	o.decided[d.Msg.MsgId] = append(o.decided[d.Msg.MsgId], dec)
	if dec.Outcome.Kind == consumer.KindUnsubscribed {
		o.unsubscribed = append(o.unsubscribed, d.Group+"/"+d.Topic)
	}
}

func (o *fakeObserver) InFlight(_ string, delta int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inFlight += delta
	o.maxInFlight = max(o.maxInFlight, o.inFlight)
}

func (o *fakeObserver) Lag(group, topic string, n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lag == nil {
		o.lag = map[string]int64{}
	}
	o.lag[group+"/"+topic] = n
	o.lagReports++
}

// decisions returns the decisions reported for the message with msgID.
func (o *fakeObserver) decisions(msgID string) []consumer.Decision {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]consumer.Decision(nil), o.decided[msgID]...)
}

// decidedCount returns how many decisions were reported in all.
func (o *fakeObserver) decidedCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, ds := range o.decided {
		n += len(ds)
	}
	return n
}

// fakeSink is a consumer.DeadLetterSink that records what it was given and returns err.
type fakeSink struct {
	mu      sync.Mutex
	err     error
	reasons []string
	events  []string
	topics  []string
}

func (s *fakeSink) DeadLetter(ctx context.Context, d *consumer.Delivery, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reasons = append(s.reasons, reason)
	s.events = append(s.events, d.Msg.GetKeys())
	s.topics = append(s.topics, d.Topic)
	return s.err
}

var errDLQSend = errors.New("send to %DLQ%cg: broker busy")

// fakeProducer is a consumer.Producer that records what it sent; fail makes the first fail sends fail.
type fakeProducer struct {
	mu        sync.Mutex
	fail      int
	status    primitive.SendStatus
	sent      []*primitive.Message
	starts    int
	shutdowns int
}

func (p *fakeProducer) Start() error { p.mu.Lock(); defer p.mu.Unlock(); p.starts++; return nil }
func (p *fakeProducer) Shutdown() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shutdowns++
	return nil
}

func (p *fakeProducer) SendSync(_ context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail > 0 {
		p.fail--
		return nil, errDLQSend
	}
	p.sent = append(p.sent, msgs...)
	return &primitive.SendResult{Status: p.status}, nil
}

// keys returns the KEYS of the letters sent.
func (p *fakeProducer) keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.sent {
		out = append(out, m.GetKeys())
	}
	return out
}

func (p *fakeProducer) counts() (starts, shutdowns int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts, p.shutdowns
}

// validConfig is the smallest Config that passes Validate.
func validConfig() consumer.Config {
	return consumer.Config{
		NameServers:   []string{"127.0.0.1:9876"},
		Group:         "cg",
		Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
	}
}

// newConsumer builds a Consumer on a fake push consumer; its dead-letter producer is a fakeProducer
// that fails every send unless opts supply another (no test reaches the real broker).
func newConsumer(t *testing.T, cfg consumer.Config, h consumer.Handler, opts ...consumer.Option) (*consumer.Consumer, *fakePush) {
	t.Helper()
	fp := newFakePush()
	unusable := &fakeProducer{fail: 1 << 30}
	opts = append([]consumer.Option{consumer.WithDeadLetterProducer(func() (consumer.Producer, error) { return unusable, nil }),
		consumer.WithEnsureTopics(func(context.Context, consumer.Config) error { return nil })}, opts...)
	opts = append(opts, consumer.WithPushConsumer(func([]rmq.Option) (irmq.PushConsumer, error) { return fp, nil }))
	c, err := consumer.New(cfg, h, opts...)
	require.NoError(t, err)
	return c, fp
}

// orderMsg is a message on ORDER with KEYS key and EVENT_ID e-<key>.
func orderMsg(key string) *primitive.MessageExt {
	m := &primitive.MessageExt{Message: primitive.Message{Topic: "ORDER"}, MsgId: "msg-" + key}
	m.WithKeys([]string{key})
	m.WithProperty("EVENT_ID", "e-"+key)
	return m
}

// handlerReturning is a Handler that returns o and err.
func handlerReturning(o consumer.Outcome, err error) consumer.Handler {
	return consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) { return o, err })
}
