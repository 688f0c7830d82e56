package dedup

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
)

// TypedTxHandler is a TxHandler whose message body was decoded into msg. d is the whole delivery: the
// event ID is d.EventID (filled by middleware.EventID, not taken from msg), and d.Msg.Body is still the
// raw body. Its results mean what a TxHandler's do.
type TypedTxHandler[T any] func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, msg T) (consumer.Outcome, error)

// HandleJSON is HandleWith(consumer.JSON{}, fn): bodies are JSON, and fields fn's type does not know are
// ignored (producers evolve; a producer that adds a field does not break the consumer).
func HandleJSON[T any](fn TypedTxHandler[T]) consumer.Handler {
	return HandleWith(consumer.JSON{}, fn)
}

// HandleWith is Handle(Typed(codec, fn)): a transactional handler that decodes each body, inside the dedup
// transaction after the claim, into a new T (a value type; the codec decodes into a *T) and calls fn. An
// undecodable body is dead-lettered at once with reason "undecodable body: …" and a permanent error wrapping
// consumer.ErrUndecodableBody; no row is kept (the package doc, "Typed handlers"). The chain needs
// middleware.Dedup, as for Handle. A nil codec or fn panics here, at construction.
func HandleWith[T any](codec consumer.Codec, fn TypedTxHandler[T]) consumer.Handler {
	return Handle(Typed(codec, fn))
}

// Typed returns the TxHandler that decodes d.Msg.Body into a new T with codec (consumer.DecodeAs) and
// calls fn; a body the codec cannot decode is a dead letter, as HandleWith says. Use it to route several
// event types, each with its own T, through one Handle: e.g. a map from event type to Typed(…) handlers.
// A nil codec or fn panics here, at construction, rather than failing every message.
func Typed[T any](codec consumer.Codec, fn TypedTxHandler[T]) TxHandler {
	switch {
	case codec == nil:
		panic("dedup.Typed: codec is nil (consumer.JSON{} decodes JSON bodies)")
	case fn == nil:
		panic("dedup.Typed: the handler function is nil")
	}
	return func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		msg, o, err := consumer.DecodeAs[T](codec, d)
		if err != nil {
			return o, err
		}
		return fn(ctx, tx, d, msg)
	}
}
