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

// Refuse returns a Handler that stands for a handler which could not be built, because of err (e.g.
// dedup.Handle(nil)): New given it (or given a Refused handler
// outermost) returns err wrapped as "consumer.New: handler: <err>", so the mistake fails at construction.
// New recognises it by identity, without calling user code and at no cost per message. If it ever runs on
// a message (it was wrapped by hand in another handler, which hides it from New), it dead-letters the
// message with the reason "handler could not be built: <err>" and no error, so nothing is retried forever
// nor acknowledged as processed. A nil err is replaced by a generic one.
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

// Pending returns a Handler that runs h on every message but that New refuses with err, as it refuses
// Refuse(err): it stands for a part of a handler that is incomplete alone and is meant to be completed
// by what wraps it (middleware.Chain returns one for a chain missing a middleware an outer chain may
// provide, and unwraps it when an outer Chain completes it). Unlike a Refuse handler, a Pending one
// wrapped by hand in another handler (hidden from New, e.g. a router's branch) runs h on each message,
// at the cost of one more call and a nil check. Refused returns err for it. A nil err is replaced by a
// generic one; a nil h gives Refuse(err).
//
// An err with a method CheckConcurrency(handlers int) error is a condition, not a refusal: New and Start
// call it with the most handlers the consumer runs at once (ConsumeGoroutines for each subscribed topic
// and %RETRY%<group>; 0 in orderly mode, which runs one per queue it holds) and fail with its error, and
// Refused returns nil. middleware.Chain returns one around a dedup store (dedup.Store.CheckConcurrency).
// When the condition also has a method CheckConfig(cfg Config) error, New and Start call it with the
// Config (defaults applied) and fail with its error (middleware.Lease's lease against HandlerTimeout and
// BatchSize).
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
