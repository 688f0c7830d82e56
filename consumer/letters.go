package consumer

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// letterSender is the part of the client's producer the consumer uses to publish its dead letters when
// no DeadLetterSink is given.
type letterSender interface {
	rmq.Sender
	Start() error
	Shutdown() error
}

// newClientProducer returns the consumer's own dead-letter producer: the group's credentials, no namespace
// option (the client would prefix "%DLQ%ns%G" once more), since letter.Message names the topic in full.
func newClientProducer(cfg Config) (letterSender, error) {
	opts := []producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver(cfg.NameServers)),
		producer.WithGroupName(rmq.InNamespace(cfg.Namespace, cfg.Group+"-rmqguard-dlq")),
		producer.WithInstanceName(cfg.InstanceName + "-dlq"),
		producer.WithRetry(2),
	}
	if !rmq.Credentials(cfg.Credentials).IsZero() {
		opts = append(opts, producer.WithCredentials(rmq.Credentials(cfg.Credentials).Client()))
	}
	return rocketmq.NewProducer(opts...)
}

// letterProducer creates and starts the consumer's own producer on first use and shuts it down once.
type letterProducer struct {
	newProducer func() (letterSender, error)

	mu     sync.Mutex
	p      letterSender
	closed bool
}

// get returns the started producer; errStopped after shutdown.
func (l *letterProducer) get() (letterSender, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errStopped
	}
	if l.p == nil {
		p, err := l.newProducer()
		if err != nil {
			return nil, fmt.Errorf("dead-letter producer: new: %w", err)
		}
		if err := p.Start(); err != nil {
			return nil, fmt.Errorf("dead-letter producer: start: %w", err)
		}
		l.p = p
	}
	return l.p, nil
}

// shutdown shuts the producer down if it was started; later gets return errStopped.
func (l *letterProducer) shutdown() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.p == nil {
		return nil
	}
	return l.p.Shutdown()
}

// checkSinkOptions is New's check of WithDeadLetterSink: no nil sink behind a non-nil interface (the
// *dlq.Publisher of a StartPublisher that failed, whose error was dropped), which would fail every dead
// letter instead of the construction. A nil interface is the opt-out to the broker's DLQ.
func checkSinkOptions(o options) error {
	if o.sink != nil {
		if v := reflect.ValueOf(o.sink); v.Kind() == reflect.Pointer && v.IsNil() {
			return &configError{Field: "WithDeadLetterSink", Problem: fmt.Sprintf(
				"the sink is a nil %T: check the error of the call that built it (dlq.StartPublisher?)", o.sink)}
		}
	}
	return nil
}

// sendLetter publishes the dead letter of d through the DeadLetterSink, or without one through the
// consumer's own producer.
func (c *Consumer) sendLetter(ctx context.Context, d *Delivery, reason string) error {
	if c.sink != nil {
		return c.sink.DeadLetter(ctx, d, reason)
	}
	p, err := c.letters.get()
	if err != nil {
		return err
	}
	return letter.Send(ctx, p.SendSync, d.origin(), reason, time.Now())
}

// sendOnce publishes the dead letter of d once (sendLetter), bounded by deadLetterSendTimeout.
func (c *Consumer) sendOnce(d *Delivery, reason string) error {
	sendCtx, cancelSend := context.WithTimeout(c.runCtx, deadLetterSendTimeout)
	defer cancelSend()
	return c.sendLetter(sendCtx, d, reason)
}
