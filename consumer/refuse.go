package consumer

import (
	"context"
	"errors"
	"reflect"
)

// errNoReason is the error of Refuse(nil).
var errNoReason = errors.New("handler refused without a reason")

// refusal is a handler that could not be built: err says why.
type refusal struct{ err error }

// handle answers a nil Delivery (New asking) with the refusal's error; a real message (a chain that bypassed
// New's check, e.g. a refused handler wrapped by hand) becomes a dead letter whose reason is that error.
func (r *refusal) handle(_ context.Context, d *Delivery) (Outcome, error) {
	if d == nil {
		return Outcome{}, r.err
	}
	return DeadLetter("handler could not be built: " + r.err.Error()), nil
}

// Refuse returns a Handler standing for one that could not be built because of err (e.g.
// dedup.Handle(nil)): New given it returns err wrapped as "consumer.New: handler: <err>". Run on a message
// anyway (hidden from New), it dead-letters it. See the package doc, "Refuse and Pending".
func Refuse(err error) Handler {
	if err == nil {
		err = errNoReason
	}
	return (&refusal{err: err}).handle
}

// pending is a handler that runs but that New refuses: h is the handler, err why it is not complete.
type pending struct {
	h   Handler
	err error
}

// innerKey is the context key under which inspect asks a pending handler for h (a *Handler to fill).
type innerKey struct{}

// handle answers a nil Delivery (New asking) with err, and h when ctx asks for it; it runs h on a real
// message.
func (p *pending) handle(ctx context.Context, d *Delivery) (Outcome, error) {
	if d == nil {
		if inner, ok := ctx.Value(innerKey{}).(*Handler); ok {
			*inner = p.h
		}
		return Outcome{}, p.err
	}
	return p.h(ctx, d)
}

// Pending returns a Handler that runs h but that New refuses with err: a part of a handler incomplete
// alone and meant to be completed by what wraps it (middleware.Chain's incomplete chains). See the package
// doc, "Refuse and Pending".
func Pending(h Handler, err error) Handler {
	if err == nil {
		err = errNoReason
	}
	if h == nil {
		return Refuse(err)
	}
	return (&pending{h: h, err: err}).handle
}

// Refused returns the error of a handler made by Refuse or Pending (nil for a Pending whose error is a
// condition on the consumer's concurrency, see Pending), or nil for any other handler (which it never
// calls). It compares code pointers: every Refuse result shares the one of (*refusal).handle's method
// value, every Pending result the one of (*pending).handle's.
func Refused(h Handler) error {
	_, _, err := inspect(h)
	return err
}

// inspect returns the condition of a Pending whose error is one, with the handler the Pending runs, or the
// error of a handler made by Refuse or Pending; h itself and nil, nil for any other handler, which it never
// calls.
func inspect(h Handler) (Handler, concurrencyChecker, error) {
	if h == nil {
		return h, nil, nil
	}
	switch reflect.ValueOf(h).Pointer() {
	case reflect.ValueOf((*refusal)(nil).handle).Pointer():
		_, err := h(context.Background(), nil) // our own code: answers a nil Delivery with its error
		return h, nil, err
	case reflect.ValueOf((*pending)(nil).handle).Pointer():
		var inner Handler
		_, err := h(context.WithValue(context.Background(), innerKey{}, &inner), nil)
		if cond, ok := err.(concurrencyChecker); ok {
			return inner, cond, nil
		}
		return h, nil, err
	}
	return h, nil, nil
}
