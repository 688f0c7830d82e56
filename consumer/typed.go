package consumer

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/rmqguard/rmqguard/retry"
)

// ErrUndecodableBody is wrapped by the error of a body that its Codec could not decode (DecodeAs): the
// message is dead-lettered at once with the reason "undecodable body: <the codec's error>".
var ErrUndecodableBody = errors.New("undecodable body")

// TypedHandler handles one Delivery whose body was decoded into msg. d is the whole delivery: the event ID
// is d.EventID (filled by middleware.EventID, not taken from msg), and d.Msg.Body is still the raw body.
// Its results mean what a Handler's do.
type TypedHandler[T any] func(ctx context.Context, d *Delivery, msg T) (Outcome, error)

// HandleJSON is HandleWith(JSON{}, fn): bodies are JSON, fields fn's type does not know are ignored.
func HandleJSON[T any](fn TypedHandler[T]) Handler {
	return HandleWith(JSON{}, fn)
}

// HandleWith returns a Handler that decodes each body into a new T with codec (DecodeAs) and calls fn with
// it. Use it for handlers that do not write through the dedup transaction (e.g. ones that call an
// idempotent HTTP API); a handler that writes through it uses dedup.HandleWith.
//
// T is the message's value type, e.g. a struct: the codec decodes into a *T, and fn gets the T. A body the
// codec cannot decode (for JSON also an empty body and null) never reaches fn: the handler returns a dead letter
// (KindDeadLetter, CausePermanent, reason "undecodable body: …") and a permanent error wrapping
// ErrUndecodableBody, so the message goes to %DLQ%<group> at once instead of being retried, on every
// delivery.
//
// A nil codec or fn is a wiring mistake: HandleWith panics at construction, naming it, rather than
// failing every message.
func HandleWith[T any](codec Codec, fn TypedHandler[T]) Handler {
	mustTyped(codec, fn == nil)
	return func(ctx context.Context, d *Delivery) (Outcome, error) {
		msg, o, err := DecodeAs[T](codec, d)
		if err != nil {
			return o, err
		}
		return fn(ctx, d, msg)
	}
}

// DecodeAs decodes d.Msg.Body into a new T with codec; it is the decode step of every typed handler
// (HandleWith, dedup.HandleWith), for handlers that route several types themselves. On success it returns
// the T, the zero Outcome and nil. When T is a pointer type, a body the codec decodes to a nil T (JSON
// "null") counts as undecodable ("the body decodes to a nil *Order"): the handler would dereference it.
// When the codec fails it returns the zero T, the outcome to return —
// DeadLetter("undecodable body: <the codec's error>") with Cause CausePermanent — and that error, marked
// retry.Permanent and wrapping ErrUndecodableBody and the codec's error (errors.Is/As reach both). codec
// must not be nil.
func DecodeAs[T any](codec Codec, d *Delivery) (T, Outcome, error) {
	var msg T
	err := codec.Decode(d.Msg.Body, &msg)
	if err == nil && isNilPointer(&msg) {
		err = fmt.Errorf("the body decodes to a nil %T", msg)
	}
	if err != nil {
		err = retry.Permanent(fmt.Errorf("%w: %w", ErrUndecodableBody, err))
		var zero T
		return zero, undecodable(err), err
	}
	return msg, Outcome{}, nil
}

// isNilPointer reports whether *v is a nil pointer: what a pointer type T decodes to from a JSON "null".
func isNilPointer[T any](v *T) bool {
	rv := reflect.ValueOf(v).Elem()
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// mustTyped panics when a typed handler is built without a codec or without its function.
func mustTyped(codec Codec, nilFn bool) {
	switch {
	case codec == nil:
		panic("consumer.HandleWith: codec is nil (consumer.JSON{} decodes JSON bodies)")
	case nilFn:
		panic("consumer.HandleWith: the handler function is nil")
	}
}
