package dlq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// Publisher publishes dead letters to %DLQ%<group> with their reason; it is a consumer.DeadLetterSink.
// The topic must exist (the broker creates it on its first own dead letter; rmqguard's tooling creates it
// up front, readable); if it does not, DeadLetter fails and the consumer falls back to the broker's
// dead-lettering, so no message is lost either way.
type Publisher struct {
	producer rmq.Sender
	now      func() time.Time

	// owned is the producer StartPublisher started (nil for NewPublisher's); Close shuts it down.
	owned  interface{ Shutdown() error }
	mu     sync.RWMutex
	closed bool
}

// ErrPublisherClosed is returned by DeadLetter after Close. The consumer then falls back as for any
// failed publish (see consumer.DeadLetterSink): no message is acknowledged without a DLQ entry.
var ErrPublisherClosed = errors.New("dlq: publisher closed")

// Close stops the Publisher: later DeadLetter calls return ErrPublisherClosed, and a producer that
// StartPublisher started is shut down (its error returned, wrapped). A producer given to NewPublisher
// belongs to the caller and is left running. Calling Close twice is safe. It makes Publisher an io.Closer,
// which consumer.Consumer.Shutdown closes.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.owned == nil {
		return nil
	}
	if err := p.owned.Shutdown(); err != nil {
		return fmt.Errorf("dlq: close publisher: shut down producer: %w", err)
	}
	return nil
}

// NewPublisher returns a Publisher sending through p, a started rocketmq.Producer that stays the caller's
// (Close does not shut it down); StartPublisher builds and owns one instead. With ACL or a namespace, build p
// with the producer group in the namespace and never the client's namespace option (the package doc,
// "Namespaces"); the letters go to %DLQ%<ns>%<group>. It returns an error if p is nil.
func NewPublisher(p interface {
	SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error)
}) (*Publisher, error) {
	if p == nil {
		return nil, errors.New("dlq: NewPublisher: producer is nil")
	}
	return &Publisher{producer: p, now: time.Now}, nil
}

// DeadLetter sends a copy of d's message to %DLQ%<d.Group> (%DLQ%<d.Namespace>%<d.Group> in a namespace) and returns nil only when the broker answered
// SEND_OK. Errors wrap the send error, or one saying the broker did not store the letter, with its status;
// ErrPublisherClosed after Close.
func (p *Publisher) DeadLetter(ctx context.Context, d *consumer.Delivery, reason string) error {
	p.mu.RLock() // held during the send: Close waits for sends in flight before shutting the producer down
	defer p.mu.RUnlock()
	if p.closed {
		return ErrPublisherClosed
	}
	o := letter.Origin{Msg: d.Msg, Group: d.Group, Topic: d.Topic, Namespace: d.Namespace}
	if err := letter.Send(ctx, p.producer.SendSync, o, reason, p.now()); err != nil {
		return fmt.Errorf("dlq: %w", err)
	}
	return nil
}
