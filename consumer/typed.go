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

// HandleJSON is HandleWith(JSON{}, fn): bodies are JSON, fields fn's type does not know are ignored.
func HandleJSON[T any](fn func(ctx context.Context, d *Delivery, msg T) (Outcome, error)) Handler {
	return HandleWith(JSON{}, fn)
}

// HandleWith returns a Handler that decodes each body into a new T with codec (DecodeAs) and calls fn
// with it (d.EventID and the raw d.Msg.Body as for any Handler), for handlers that do not write through
// the dedup transaction (those use dedup.HandleWith). A body the codec refuses is dead-lettered at once.
// See the package doc, "Typed handlers".
func HandleWith[T any](codec Codec, fn func(ctx context.Context, d *Delivery, msg T) (Outcome, error)) Handler {
	mustTyped(codec, fn == nil)
	return HandlerFunc(func(ctx context.Context, d *Delivery) (Outcome, error) {
		msg, o, err := DecodeAs[T](codec, d)
		if err != nil {
			return o, err
		}
		return fn(ctx, d, msg)
	})
}

// DecodeAs decodes d.Msg.Body into a new T with codec, the typed handlers' decode step: the T, the zero
// Outcome and nil; or, when the body cannot be decoded (or decodes to a nil pointer T), the zero T, a
// dead-letter Outcome (Cause "permanent") and a retry.Permanent error wrapping ErrUndecodableBody and
// the codec's error. codec must not be nil. See the package doc, "Typed handlers".
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
