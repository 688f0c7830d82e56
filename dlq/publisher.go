package dlq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmqguard/rmqguard/consumer"
)

// Properties rmqguard adds to a dead letter it publishes (see consumer.DeadLetterMessage). The original's
// user properties, KEYS and tag are kept, and RETRY_TOPIC names the original topic (as on the broker's own
// dead letters).
const (
	// PropReason says why the message was dead-lettered, e.g. "unidentifiable message: …".
	PropReason = consumer.PropDeadLetterReason
	// PropOriginMsgID is the message ID (UNIQ_KEY) of the original message.
	PropOriginMsgID = consumer.PropDeadLetterOriginMsgID
	// PropReconsumeTimes is the original's ReconsumeTimes when it was dead-lettered.
	PropReconsumeTimes = consumer.PropDeadLetterReconsumeTimes
	// PropDeadLetteredAt is the time of dead-lettering, RFC 3339 with nanoseconds, UTC.
	PropDeadLetteredAt = consumer.PropDeadLetteredAt
	// PropGroup is the consumer group that dead-lettered the message.
	PropGroup = consumer.PropDeadLetterGroup
)

// Producer is the part of the client's producer that Publisher uses.
type Producer interface {
	SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error)
}

// ErrNotStored means the broker answered a dead-letter send with a status other than SEND_OK; it is
// consumer.ErrDeadLetterNotStored.
var ErrNotStored = consumer.ErrDeadLetterNotStored

// Publisher publishes dead letters to %DLQ%<group> with their reason; it is a consumer.DeadLetterSink.
// The topic must exist (the broker creates it on its first own dead letter; rmqguard's tooling creates it
// up front, readable); if it does not, DeadLetter fails and the consumer falls back to the broker's
// dead-lettering, so no message is lost either way.
type Publisher struct {
	producer Producer
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

// NewPublisher returns a Publisher sending through p, a started producer that stays the caller's (Close does
// not shut it down); StartPublisher builds and owns one instead. With ACL or a namespace, build p from a
// Cluster (ProducerOptions), never with the client's namespace option (the package doc, "Namespaces"); the
// letters go to %DLQ%<ns>%<group>. It returns an error if p is nil.
func NewPublisher(p Producer) (*Publisher, error) {
	if p == nil {
		return nil, errors.New("dlq: NewPublisher: producer is nil")
	}
	return &Publisher{producer: p, now: time.Now}, nil
}

// DeadLetter sends a copy of d's message to %DLQ%<d.Group> (%DLQ%<d.Namespace>%<d.Group> in a namespace) and returns nil only when the broker answered
// SEND_OK. Errors wrap the send error, or ErrNotStored with the status (consumer.SendDeadLetter);
// ErrPublisherClosed after Close.
func (p *Publisher) DeadLetter(ctx context.Context, d *consumer.Delivery, reason string) error {
	p.mu.RLock() // held during the send: Close waits for sends in flight before shutting the producer down
	defer p.mu.RUnlock()
	if p.closed {
		return ErrPublisherClosed
	}
	if err := consumer.SendDeadLetter(ctx, p.producer, d, reason, p.now()); err != nil {
		return fmt.Errorf("dlq: %w", err)
	}
	return nil
}

// LetterMessage builds the dead letter of d (consumer.DeadLetterMessage): topic %DLQ%<group>, the original body,
// tag, KEYS and user properties, RETRY_TOPIC set to the original topic, and the Prop* metadata with reason.
func LetterMessage(d *consumer.Delivery, reason string, at time.Time) *primitive.Message {
	return consumer.DeadLetterMessage(d, reason, at)
}
