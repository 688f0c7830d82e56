package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/body"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
)

// DeadLetterSink publishes a message to %DLQ%<group> with the reason attached; DeadLetter returns nil
// only when the broker accepted the copy (then the original is acknowledged). On error the message falls
// back as the package doc, "Dead letters", says.
type DeadLetterSink interface {
	DeadLetter(ctx context.Context, d *Delivery, reason string) error
}

// Option changes how New builds a Consumer.
type Option func(*options)

type options struct {
	logger   *zap.Logger
	sink     DeadLetterSink
	push     func([]rmq.Option) (irmq.PushConsumer, error)
	producer func() (letterSender, error)
	probe    healthProbe
	// probeGiven: WithHealthProbe was given, so the handler's store is not the default probe.
	probeGiven bool
	// sinkGiven: WithDeadLetterSink was given; a nil sink then leaves a lone letter to the broker's DLQ.
	sinkGiven bool
	observer  Observer
	observed  bool // WithObserver was given: poll the lag
	// ensure creates the group's topics in Start (ensureGroupTopics; a fake in tests).
	ensure     func(context.Context, Config) error
	background []func(context.Context) error
	tracer     trace.Tracer // WithTracerProvider's; nil: no spans
}

// WithLogger sets the logger for the consumer's own lines: one per message at its final decision (debug
// for success, info for a retry, warn and error where a person must look) and its own events. Default:
// zap.NewProduction() (JSON on stderr, info and above). Mind zap's sampler in bursts. See the package doc,
// "Logs".
func WithLogger(l *zap.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = withoutStacks(l)
		}
	}
}

// WithDeadLetterSink makes s publish the consumer's dead letters instead of its own producer (producer
// group "<group>-rmqguard-dlq", started on the first letter, shut down by Shutdown), which by default
// publishes each with its reason to %DLQ%<group>. A sink that implements io.Closer is closed by Shutdown
// after the client. WithDeadLetterSink(nil) leaves a letter delivered alone to the broker's DLQ
// (delay level -1, no reason); batches and orderly mode still publish. New fails on a nil pointer in s.
func WithDeadLetterSink(s DeadLetterSink) Option {
	return func(o *options) { o.sink, o.sinkGiven = s, true }
}

// WithPushConsumer replaces the client's push consumer constructor, for this module's tests with a fake.
func WithPushConsumer(f func(opts []rmq.Option) (irmq.PushConsumer, error)) Option {
	return func(o *options) { o.push = f }
}

// cancelGrace is how long Shutdown waits, after cancelling handlers at the drain timeout, for them to
// return before it shuts the client down regardless.
const cancelGrace = 5 * time.Second

// deadLetterSendTimeout bounds one DeadLetterSink call.
const deadLetterSendTimeout = 30 * time.Second

// errStopped is returned by Start and Run after Shutdown, and answers deliveries that arrive while
// shutting down (the client only logs it).
var errStopped = errors.New("rmqguard consumer: stopped")

// Consumer wraps the client's push consumer: every message runs through the Handler (usually a
// middleware chain), and its Outcome becomes the client's result in one place (resolve.go).
type Consumer struct {
	cfg     Config
	handler Handler
	log     *zap.Logger
	sink    DeadLetterSink
	push    irmq.PushConsumer
	ensure  func(context.Context, Config) error // ensureGroupTopics; skipped with Config.SkipTopicEnsure
	// publishAlone: a dead letter delivered alone is published (the sink, else the own producer); false
	// after WithDeadLetterSink(nil), which leaves it to the broker's DLQ.
	publishAlone bool
	// checks are what the handlers depend on that limits how many may run at once (see the package doc, "New"); New
	// and Start run them.
	checks []concurrencyCheck

	// runCtx is the parent of every handler context; cancelRun ends in-flight handlers when the drain
	// timeout is over.
	runCtx    context.Context
	cancelRun context.CancelFunc

	gate     *gate
	filters  map[string]tagFilter // topic → its subscription's tags
	observer Observer
	letters  *letterProducer
	lag      *lagPoller    // nil without WithObserver
	bodies   *body.Decoder // decodes every delivery's body; closed by Shutdown
	bg       *background   // WithBackground's functions
	tracer   trace.Tracer  // nil without WithTracerProvider

	mu       sync.Mutex
	stopping bool
	// clientStarted is set just before Start first starts the client, and never cleared: the client's
	// Shutdown panics on a client that never started, so Shutdown leaves it alone unless it is set (a Start
	// that failed before the client, e.g. on the topic ensure or an ACL refusal, leaves it unset; a failed
	// second Start does not clear the first one's).
	clientStarted bool
	inflight      sync.WaitGroup
	// clientDown is closed when Shutdown has shut the client down; callbacks that must not be answered
	// (late, cancelled by Shutdown, or waiting for the store when it began) wait for it.
	clientDown chan struct{}
}

// New validates cfg (an error "consumer config: <Field>: <problem>" per bad field, joined), builds the
// client's push consumer and subscribes every topic; it does not start consuming: call Start or Run. A nil
// h is such an error; a refused or pending h is its error, wrapped as "consumer.New: handler: <err>". See
// the package doc, "New".
func New(cfg Config, h Handler, opts ...Option) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, &configError{Field: "Handler", Problem: "required"}
	}
	h, cond, err := inspect(h) // a condition's handler runs without its pending layer
	if err != nil {
		return nil, fmt.Errorf("consumer.New: handler: %w", err)
	}
	cfg = cfg.withDefaults()
	o := options{push: newClientPushConsumer, observer: nopObserver{}, ensure: ensureGroupTopics,
		producer: func() (letterSender, error) { return newClientProducer(cfg) }}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		l, err := zap.NewProduction()
		if err != nil {
			return nil, fmt.Errorf("consumer.New: the default logger: %w", err)
		}
		o.logger = withoutStacks(l)
	}
	if err := checkSinkOptions(o); err != nil {
		return nil, err
	}
	checks := concurrencyChecks(cond, o.probe)
	if err := checkConcurrency(cfg, checks, "consumer.New"); err != nil {
		return nil, err
	}
	if p, ok := cond.(healthProbe); ok && !o.probeGiven {
		o.probe = p // the chain's store
	}
	filters := make(map[string]tagFilter, len(cfg.Subscriptions))
	for _, s := range cfg.Subscriptions {
		filters[s.Topic], _ = parseTagExpression(s.Expression) // Validate checked it
	}
	from := rmq.ConsumeFromLastOffset
	if cfg.StartFromFirstOffset {
		from = rmq.ConsumeFromFirstOffset
	}
	pushOpts := append(clientOptions(cfg), []rmq.Option{
		rmq.WithInstance(cfg.InstanceName),
		rmq.WithConsumerModel(rmq.Clustering),
		rmq.WithConsumeFromWhere(from),
		rmq.WithMaxReconsumeTimes(int32(cfg.MaxAttempts)),
		rmq.WithConsumeGoroutineNums(cfg.ConsumeGoroutines),
		rmq.WithConsumeMessageBatchMaxSize(cfg.BatchSize),
		rmq.WithConsumeTimeout(cfg.ConsumeTimeout),
	}...)
	if cfg.Orderly {
		// The client's option is a time.Duration despite its name; the callback also sets the orderly
		// context's own value on every failure answer, which is the one the orderly path sleeps on.
		pushOpts = append(pushOpts, rmq.WithConsumerOrder(true), rmq.WithSuspendCurrentQueueTimeMillis(cfg.SuspendTime))
	}
	push, err := o.push(pushOpts)
	if err != nil {
		return nil, fmt.Errorf("rmqguard consumer %s: create push consumer: %w", cfg.Group, err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	zd := &body.Decoder{}
	c := &Consumer{cfg: cfg, handler: decompressing(h, zd), bodies: zd, log: o.logger, sink: o.sink, push: push, runCtx: runCtx, cancelRun: cancel,
		gate: newGate(runCtx, cfg.Group, push, o.probe, o.observer, o.logger), filters: filters, observer: o.observer,
		letters: &letterProducer{newProducer: o.producer}, clientDown: make(chan struct{}), ensure: o.ensure,
		publishAlone: !o.sinkGiven || o.sink != nil, checks: checks, bg: &background{fns: o.background}, tracer: o.tracer}
	if o.observed {
		c.lag = newLagPoller(runCtx, cfg, push, o.observer)
	}
	for _, s := range cfg.Subscriptions {
		sel := rmq.MessageSelector{Type: rmq.TAG, Expression: s.Expression}
		if err := push.Subscribe(s.Topic, sel, c.consume); err != nil {
			cancel()
			return nil, fmt.Errorf("rmqguard consumer %s: subscribe %s: %w", cfg.Group, s.Topic, err)
		}
	}
	return c, nil
}

func newClientPushConsumer(opts []rmq.Option) (irmq.PushConsumer, error) {
	return rocketmq.NewPushConsumer(opts...)
}

// Start starts consuming, and with WithObserver the lag poller (every Config.LagInterval). Unless
// Config.SkipTopicEnsure it first creates the group's missing %RETRY% and %DLQ% topics, failing with that
// error wrapped with the group. A broker that refuses Config.Credentials fails it with an error matching
// ErrACL; the client's Start fails when a subscribed topic has no route on the name server. It repeats
// New's concurrency checks first (a pool's limit may have changed since), and fails after Shutdown.
func (c *Consumer) Start() error {
	c.mu.Lock()
	stopping := c.stopping
	c.mu.Unlock()
	if stopping {
		return errStopped
	}
	if err := checkConcurrency(c.cfg, c.checks, "consumer.Start"); err != nil {
		return err
	}
	if err := c.ensureTopics(); err != nil {
		return err
	}
	if err := c.checkAccess(); err != nil {
		// Before the client starts: shutting the client down while its first rebalance runs is a data race
		// inside rocketmq-client-go (rmqClient.close is a plain bool), so a refused consumer never starts it.
		return err
	}
	c.mu.Lock()
	c.clientStarted = true
	c.mu.Unlock()
	c.announceSubscriptions() // before the client starts: its first callback may come at once
	if err := c.push.Start(); err != nil {
		return fmt.Errorf("rmqguard consumer %s: start: %w (the client fails here when a subscribed topic has no route: create it first, e.g. rmqguard topic ensure)", c.cfg.Group, err)
	}
	if c.lag != nil {
		c.lag.start()
	}
	c.bg.start(c.log, c.cfg.Group)
	c.log.Info("consumer started", zap.String("group", c.cfg.Group), zap.String("instance", c.cfg.InstanceName))
	return nil
}

// Shutdown stops taking deliveries, waits for in-flight handlers up to DrainTimeout or ctx's end, then
// cancels what still runs (not answered: it comes back after a restart, no attempt spent) and shuts the
// client down. It returns the client's error, or context.DeadlineExceeded wrapped when handlers had to be
// cancelled; calling it twice is safe. See the package doc, "Shutdown".
func (c *Consumer) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	if c.stopping {
		c.mu.Unlock()
		return nil
	}
	c.stopping = true
	c.mu.Unlock()
	c.gate.stop() // before Suspend: the prober must not resume the client after it
	if c.lag != nil {
		c.lag.stop()
	}
	c.push.Suspend()

	drained := make(chan struct{})
	go func() {
		c.inflight.Wait()
		close(drained)
	}()
	timer := time.NewTimer(c.cfg.DrainTimeout)
	defer timer.Stop()
	drainErr := c.awaitDrain(ctx, drained, timer.C)
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
		c.mu.Lock()
		started := c.clientStarted
		c.mu.Unlock()
		if !started {
			return nil
		}
		return c.push.Shutdown()
	}()
	c.bodies.Close() // after the client: no delivery decodes any more
	c.bg.stop()      // after the drain: the relay sends what the last handlers committed
	if perr := c.letters.shutdown(); perr != nil {
		err = errors.Join(err, fmt.Errorf("dead-letter producer: %w", perr))
	}
	if closer, ok := c.sink.(io.Closer); ok {
		if serr := closer.Close(); serr != nil {
			err = errors.Join(err, fmt.Errorf("dead-letter sink: %w", serr))
		}
	}
	c.log.Info("consumer stopped", zap.String("group", c.cfg.Group), zap.Error(errors.Join(drainErr, err)))
	if err != nil {
		return errors.Join(drainErr, fmt.Errorf("rmqguard consumer %s: shutdown client: %w", c.cfg.Group, err))
	}
	return drainErr
}

// awaitDrain waits until drained is closed, timeout fires (DrainTimeout) or ctx ends, and returns the
// drain error: nil when everything drained, context.DeadlineExceeded or ctx's error wrapped otherwise.
func (c *Consumer) awaitDrain(ctx context.Context, drained <-chan struct{}, timeout <-chan time.Time) error {
	select {
	case <-drained:
		return nil
	case <-timeout:
		return fmt.Errorf("rmqguard consumer %s: drain timeout %s: %w", c.cfg.Group, c.cfg.DrainTimeout, context.DeadlineExceeded)
	case <-ctx.Done():
		return fmt.Errorf("rmqguard consumer %s: drain: %w", c.cfg.Group, ctx.Err())
	}
}
