package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.uber.org/zap"
)

// PushConsumer is the part of the client's push consumer the wrapper uses; tests may supply a fake
// through WithPushConsumer.
type PushConsumer interface {
	Start() error
	Shutdown() error
	Suspend()
	Subscribe(topic string, selector rmq.MessageSelector,
		f func(context.Context, ...*primitive.MessageExt) (rmq.ConsumeResult, error)) error
}

// DeadLetterSink publishes a message to %DLQ%<group> with the reason attached. DeadLetter returns nil
// only when the broker accepted the copy; then the original is acknowledged. On error the consumer falls
// back to the broker's own dead-lettering (ConsumeRetryLater with DelayLevelDLQ), so the message is never
// acknowledged without a DLQ entry.
type DeadLetterSink interface {
	DeadLetter(ctx context.Context, d *Delivery, reason string) error
}

// Option changes how New builds a Consumer.
type Option func(*options)

type options struct {
	logger *zap.Logger
	sink   DeadLetterSink
	push   func([]rmq.Option) (PushConsumer, error)
}

// WithLogger sets the logger for the wrapper's own messages. Default: zap.NewNop().
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.logger = l } }

// WithDeadLetterSink makes the consumer publish dead letters itself, with their reason, and acknowledge
// them only after the publish succeeded. Without it, dead letters use the broker's DLQ via DelayLevelDLQ.
func WithDeadLetterSink(s DeadLetterSink) Option { return func(o *options) { o.sink = s } }

// WithPushConsumer replaces the client's push consumer constructor; for tests with a fake PushConsumer.
func WithPushConsumer(f func(opts []rmq.Option) (PushConsumer, error)) Option {
	return func(o *options) { o.push = f }
}

// cancelGrace is how long Shutdown waits, after cancelling handlers at the drain timeout, for them to
// return before it shuts the client down regardless.
const cancelGrace = 5 * time.Second

// deadLetterSendTimeout bounds one DeadLetterSink call.
const deadLetterSendTimeout = 30 * time.Second

// ErrStopped is returned by Start after Shutdown, and answers deliveries that arrive while shutting down.
var ErrStopped = errors.New("rmqguard consumer: stopped")

// Consumer wraps the client's push consumer: every message runs through the Handler (usually a
// middleware chain), and its Outcome becomes the client's result in Resolve.
type Consumer struct {
	cfg     Config
	handler Handler
	log     *zap.Logger
	sink    DeadLetterSink
	push    PushConsumer

	// runCtx is the parent of every handler context; cancelRun ends in-flight handlers when the drain
	// timeout is over.
	runCtx    context.Context
	cancelRun context.CancelFunc

	mu       sync.Mutex
	stopping bool
	inflight sync.WaitGroup
	// clientDown is closed when Shutdown has shut the client down; late callbacks wait for it.
	clientDown chan struct{}
}

// New validates cfg (a *ConfigError per bad field, joined) and builds the client's push consumer with
// cfg's group, name servers, instance name, MaxReconsumeTimes, goroutines, batch size and consume
// timeout. It subscribes every topic but does not start consuming: call Start.
func New(cfg Config, h Handler, opts ...Option) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, &ConfigError{Field: "Handler", Problem: "required"}
	}
	cfg = cfg.withDefaults()
	o := options{logger: zap.NewNop(), push: newClientPushConsumer}
	for _, opt := range opts {
		opt(&o)
	}
	from := rmq.ConsumeFromLastOffset
	if cfg.StartFrom == StartFromFirstOffset {
		from = rmq.ConsumeFromFirstOffset
	}
	push, err := o.push([]rmq.Option{
		rmq.WithGroupName(cfg.Group),
		rmq.WithNsResolver(primitive.NewPassthroughResolver(cfg.NameServers)),
		rmq.WithInstance(cfg.InstanceName),
		rmq.WithConsumerModel(rmq.Clustering),
		rmq.WithConsumeFromWhere(from),
		rmq.WithMaxReconsumeTimes(int32(cfg.MaxAttempts)),
		rmq.WithConsumeGoroutineNums(cfg.ConsumeGoroutines),
		rmq.WithConsumeMessageBatchMaxSize(cfg.BatchSize),
		rmq.WithConsumeTimeout(cfg.ConsumeTimeout),
	})
	if err != nil {
		return nil, fmt.Errorf("rmqguard consumer %s: create push consumer: %w", cfg.Group, err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c := &Consumer{cfg: cfg, handler: h, log: o.logger, sink: o.sink, push: push, runCtx: runCtx, cancelRun: cancel,
		clientDown: make(chan struct{})}
	for _, s := range cfg.Subscriptions {
		sel := rmq.MessageSelector{Type: rmq.TAG, Expression: s.Expression}
		if err := push.Subscribe(s.Topic, sel, c.consume); err != nil {
			cancel()
			return nil, fmt.Errorf("rmqguard consumer %s: subscribe %s: %w", cfg.Group, s.Topic, err)
		}
	}
	return c, nil
}

func newClientPushConsumer(opts []rmq.Option) (PushConsumer, error) {
	return rocketmq.NewPushConsumer(opts...)
}

// Group returns the consumer group.
func (c *Consumer) Group() string { return c.cfg.Group }

// Start starts consuming. The client's Start fails when a subscribed topic has no route on the name
// server (create topics first). It returns ErrStopped after Shutdown.
func (c *Consumer) Start() error {
	c.mu.Lock()
	stopping := c.stopping
	c.mu.Unlock()
	if stopping {
		return ErrStopped
	}
	if err := c.push.Start(); err != nil {
		return fmt.Errorf("rmqguard consumer %s: start: %w", c.cfg.Group, err)
	}
	c.log.Info("consumer started", zap.String("group", c.cfg.Group), zap.String("instance", c.cfg.InstanceName))
	return nil
}

// Shutdown stops taking new deliveries (the client is suspended; messages it had already fetched are not
// handled, and come back after a restart with ReconsumeTimes unchanged), waits for in-flight handlers up to DrainTimeout or
// ctx's end, whichever comes first, then cancels what still runs (their transactions roll back, their
// messages are retried) and shuts the client down, which persists the committed offsets.
// It returns the client's shutdown error, or context.DeadlineExceeded wrapped when handlers had to be
// cancelled. Calling it twice is safe.
func (c *Consumer) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	if c.stopping {
		c.mu.Unlock()
		return nil
	}
	c.stopping = true
	c.mu.Unlock()
	c.push.Suspend()

	drained := make(chan struct{})
	go func() {
		c.inflight.Wait()
		close(drained)
	}()
	timer := time.NewTimer(c.cfg.DrainTimeout)
	defer timer.Stop()
	var drainErr error
	select {
	case <-drained:
	case <-timer.C:
		drainErr = fmt.Errorf("rmqguard consumer %s: drain timeout %s: %w", c.cfg.Group, c.cfg.DrainTimeout, context.DeadlineExceeded)
	case <-ctx.Done():
		drainErr = fmt.Errorf("rmqguard consumer %s: drain: %w", c.cfg.Group, ctx.Err())
	}
	c.cancelRun()
	if drainErr != nil {
		// Cancelled handlers return promptly when they honour their context; give them a short grace so
		// that their results reach the client before it shuts down, but never hang on one that does not.
		grace := time.NewTimer(cancelGrace)
		defer grace.Stop()
		select {
		case <-drained:
		case <-grace.C:
			c.log.Warn("handlers still running after cancellation; shutting the client down anyway (their messages are redelivered)",
				zap.String("group", c.cfg.Group), zap.Duration("grace", cancelGrace))
		}
	}
	err := func() error {
		defer close(c.clientDown) // even if the client panics, late callbacks must not wait forever
		return c.push.Shutdown()
	}()
	c.log.Info("consumer stopped", zap.String("group", c.cfg.Group), zap.Error(errors.Join(drainErr, err)))
	if err != nil {
		return errors.Join(drainErr, fmt.Errorf("rmqguard consumer %s: shutdown client: %w", c.cfg.Group, err))
	}
	return drainErr
}

// enter registers an in-flight callback; false once shutting down.
func (c *Consumer) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return false
	}
	c.inflight.Add(1)
	return true
}

// consume is the client's callback: each message of the batch runs through the handler with its own
// context; dead letters are published through the sink only when the batch as a whole will be
// acknowledged (a retried batch would publish them again on every redelivery); the combined outcome is
// resolved into the client's result.
//
// A callback that arrives after Shutdown began (a message the client had already fetched) does not run the
// handler and does not answer until the client has shut down: the client then discards the result (its
// process queues are dropped), so the message is neither acknowledged nor sent back with ReconsumeTimes
// raised, and its offset is not committed; it is redelivered after a restart as it was.
func (c *Consumer) consume(ctx context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
	if !c.enter() {
		<-c.clientDown
		return rmq.ConsumeRetryLater, ErrStopped
	}
	defer c.inflight.Done()
	ds := make([]*Delivery, len(msgs))
	outcomes := make([]Outcome, len(msgs))
	errs := make([]error, len(msgs))
	for i, msg := range msgs {
		ds[i] = NewDelivery(c.cfg.Group, msg)
		ds[i].MaxAttempts = c.cfg.MaxAttempts
		outcomes[i], errs[i] = c.handleOne(ds[i])
	}
	if c.sink != nil && !needsRetry(outcomes, errs) {
		for i := range ds {
			if outcomes[i].Kind == KindDeadLetter {
				outcomes[i], errs[i] = c.publishDeadLetter(ds[i], outcomes[i], errs[i])
			}
		}
	}
	o, err := combine(outcomes, errs)
	res := Resolve(o, err, Concurrent)
	if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok && res.Result == rmq.ConsumeRetryLater {
		cc.DelayLevelWhenNextConsume = res.DelayLevel
	}
	// The error is only logged by the client; the result is what counts.
	return res.Result, nil
}

// needsRetry reports whether some message of a batch, other than a dead letter, is not acknowledged.
func needsRetry(outcomes []Outcome, errs []error) bool {
	for i, o := range outcomes {
		if o.Kind != KindDeadLetter && (errs[i] != nil || !o.Kind.Acknowledges()) {
			return true
		}
	}
	return false
}

// handleOne runs the handler for one delivery under HandlerTimeout.
func (c *Consumer) handleOne(d *Delivery) (Outcome, error) {
	ctx, cancel := context.WithTimeout(c.runCtx, c.cfg.HandlerTimeout)
	defer cancel()
	o, err := c.handler(ctx, d)
	if o.Kind == KindUnset && err == nil {
		c.log.Error("handler returned no outcome and no error; retrying (the zero Outcome is not a success)",
			zap.String("group", d.Group), zap.String("topic", d.Topic), zap.String("msg_id", d.Msg.MsgId))
	}
	return o, err
}

// publishDeadLetter publishes a dead letter through the sink. On success the outcome becomes
// KindDeadLettered (acknowledged); on failure the dead-letter outcome stays, so the broker's own DLQ takes
// the message (single message) or the batch is retried.
func (c *Consumer) publishDeadLetter(d *Delivery, o Outcome, err error) (Outcome, error) {
	reason := o.Reason
	if reason == "" && err != nil {
		reason = err.Error()
	}
	sendCtx, cancelSend := context.WithTimeout(c.runCtx, deadLetterSendTimeout)
	defer cancelSend()
	if sendErr := c.sink.DeadLetter(sendCtx, d, reason); sendErr != nil {
		c.log.Error("dead-letter publish failed; falling back to the broker's DLQ", zap.String("group", d.Group),
			zap.String("topic", d.Topic), zap.String("msg_id", d.Msg.MsgId), zap.Error(sendErr))
		return o, err
	}
	return Outcome{Kind: KindDeadLettered, Reason: reason}, nil
}
