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

// HandleJSON returns a Handler that decodes each JSON body into a new T (DecodeAs with JSON{}) and calls fn
// with it, for handlers that do not write through the dedup transaction (those use dedup.HandleJSON).
// Fields T does not know are ignored; a body that does not decode is dead-lettered at once. A nil fn
// panics here. See the package doc, "Typed handlers".
func HandleJSON[T any](fn func(ctx context.Context, d *Delivery, msg T) (Outcome, error)) Handler {
	if fn == nil {
		panic("consumer.HandleJSON: the handler function is nil")
	}
	return HandlerFunc(func(ctx context.Context, d *Delivery) (Outcome, error) {
		msg, o, err := DecodeAs[T](JSON{}, d)
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
