package consumer

import "context"

// Combine exposes combine, the folding of a batch's outcomes, to the external tests.
func Combine(outcomes []Outcome, errs []error) (Outcome, error) {
	ms := make([]message, len(outcomes))
	for i := range outcomes {
		ms[i] = message{outcome: outcomes[i], err: errs[i]}
	}
	return combine(ms)
}

// Producer is the consumer's own dead-letter producer, for the external tests' fakes.
type Producer = letterSender

// WithDeadLetterProducer replaces the constructor of the consumer's own dead-letter producer.
func WithDeadLetterProducer(f func() (Producer, error)) Option {
	return func(o *options) { o.producer = f }
}

// WithEnsureTopics replaces the topic ensure of Start (ensureGroupTopics), for tests without a broker.
func WithEnsureTopics(f func(ctx context.Context, cfg Config) error) Option {
	return func(o *options) { o.ensure = f }
}

// DelayLevelDLQ exposes delayLevelDLQ, the delay level that sends a message to the DLQ at once.
const DelayLevelDLQ = delayLevelDLQ

// Concurrent and Orderly name the consumption modes for Resolve.
const (
	Concurrent = false
	Orderly    = true
)

// Resolution is resolution, what the client is told about a message.
type Resolution = resolution

// Resolve exposes resolveOutcome, the one place an Outcome becomes a client result.
func Resolve(o Outcome, err error, orderly bool) Resolution { return resolveOutcome(o, err, orderly) }

// ConfigError is configError, the error of one invalid Config field, for errors.As in the external tests.
type ConfigError = configError

// KindUnset is kindUnset, the zero Kind (no middleware decided).
const KindUnset = kindUnset

// ErrStopped is errStopped, what Start and Run return after Shutdown and a callback left unanswered.
var ErrStopped = errStopped
