// Package pending carries the error of a handler that is not ready to run to consumer.New, which refuses
// it where the consumer is built instead of failing messages. It works on any handler type of the shape
// func(context.Context, *D) (O, error): H is consumer.Handler, D consumer.Delivery, O consumer.Outcome.
//
// Refuse returns a handler that stands for one which could not be built, because of err (e.g.
// dedup.Handle(nil)): consumer.New given it (or given a refused handler outermost) returns err wrapped as
// "consumer.New: handler: <err>", so the mistake fails at construction. New recognises it by identity,
// without calling user code and at no cost per message. If it ever runs on a message (it was wrapped by
// hand in another handler, which hides it from New), it dead-letters the message with the reason
// "handler could not be built: <err>" and no error, so nothing is retried forever nor acknowledged as
// processed. A nil err is replaced by a generic one.
//
// Wrap returns a handler that runs h on every message but that New refuses with err, as it refuses
// Refuse(err): it stands for a part of a handler that is incomplete alone and is meant to be completed by
// what wraps it (middleware.Chain returns one for a chain missing a middleware an outer chain may provide,
// and unwraps it when an outer Chain completes it). Unlike a refused handler, a wrapped one hidden from
// New (e.g. a router's branch) runs h on each message, at the cost of one more call and a nil check. A nil
// err is replaced by a generic one.
//
// An err with a method CheckConcurrency(handlers int) error is a condition, not a refusal: consumer.New
// and Start call it with the most handlers the consumer runs at once (ConsumeGoroutines for each
// subscribed topic and %RETRY%<group>; 0 in orderly mode, which runs one per queue it holds) and fail with
// its error. middleware.Chain returns one around a dedup store (dedup.Store.CheckConcurrency). When the
// condition also has a method CheckConfig(cfg consumer.Config) error, New and Start call it with the
// Config (defaults applied) and fail with its error (middleware.Lease's lease against HandlerTimeout and
// BatchSize).
//
// Inspect returns what Refuse or Wrap put in a handler; it compares code pointers: every Refuse result
// shares the one of the (*refusal).handle method value its fn makes, every Wrap result the one of
// (*wrapped).handle's.
package pending

import (
	"context"
	"errors"
	"reflect"
)

// Handler is the shape of the handlers this package works on (consumer.Handler).
type Handler[D, O any] interface {
	~func(context.Context, *D) (O, error)
}

// errNoReason is the error of a refusal or a wrapped handler without a reason.
var errNoReason = errors.New("handler refused without a reason")

// refusal is a handler that could not be built: err says why, deadLetter makes its outcome on a message.
type refusal[D, O any] struct {
	err        error
	deadLetter func(reason string) O
}

// handle answers a nil delivery (Inspect asking) with the refusal's error; a real message (a chain that
// bypassed New's check, e.g. a refused handler wrapped by hand) becomes a dead letter whose reason is
// that error.
func (r *refusal[D, O]) handle(_ context.Context, d *D) (O, error) {
	if d == nil {
		var zero O
		return zero, r.err
	}
	return r.deadLetter("handler could not be built: " + r.err.Error()), nil
}

// Refuse returns an H standing for a handler that could not be built because of err; deadLetter
// (consumer.DeadLetter) makes its outcome should it run on a message. See the package doc.
func Refuse[H Handler[D, O], D, O any](err error, deadLetter func(reason string) O) H {
	if err == nil {
		err = errNoReason
	}
	return (&refusal[D, O]{err: err, deadLetter: deadLetter}).fn()
}

// fn returns r.handle: the one place a refusal's method value is made, so that every one shares its code
// pointer (a generic method value made in two places may not).
//
//go:noinline
func (r *refusal[D, O]) fn() func(context.Context, *D) (O, error) { return r.handle }

// wrapped is a handler that runs but that New refuses: h is the handler, err why it is not complete.
type wrapped[D, O any] struct {
	h   func(context.Context, *D) (O, error)
	err error
}

// innerKey is the context key under which Inspect asks a wrapped handler for h (a *any to fill).
type innerKey struct{}

// handle answers a nil delivery (Inspect asking) with err, and h when ctx asks for it; it runs h on a
// real message.
func (w *wrapped[D, O]) handle(ctx context.Context, d *D) (O, error) {
	if d == nil {
		if inner, ok := ctx.Value(innerKey{}).(*func(context.Context, *D) (O, error)); ok {
			*inner = w.h
		}
		var zero O
		return zero, w.err
	}
	return w.h(ctx, d)
}

// Wrap returns an H that runs h (not nil) but that New refuses with err: a part of a handler incomplete
// alone and meant to be completed by what wraps it, or h with a condition on the consumer. See the package
// doc.
func Wrap[H Handler[D, O], D, O any](h H, err error) H {
	if err == nil {
		err = errNoReason
	}
	return (&wrapped[D, O]{h: h, err: err}).fn()
}

// fn returns w.handle, made in one place as refusal's fn says.
//
//go:noinline
func (w *wrapped[D, O]) fn() func(context.Context, *D) (O, error) { return w.handle }

// Inspect returns the error of a handler made by Refuse or Wrap, with, for Wrap's, the handler it runs
// (wrapped true); for any other handler, which it never calls, nil, nil and false.
func Inspect[H Handler[D, O], D, O any](h H) (inner H, err error, isWrapped bool) {
	if h == nil {
		return nil, nil, false
	}
	switch reflect.ValueOf(h).Pointer() {
	case reflect.ValueOf((*refusal[D, O])(nil).fn()).Pointer():
		_, err := h(context.Background(), nil) // this package's code: answers a nil delivery with its error
		return nil, err, false
	case reflect.ValueOf((*wrapped[D, O])(nil).fn()).Pointer():
		var in func(context.Context, *D) (O, error)
		_, err := h(context.WithValue(context.Background(), innerKey{}, &in), nil)
		return in, err, true
	}
	return nil, nil, false
}

// Condition is the error of a wrapped handler that is a condition on the consumer, not a refusal (see the
// package doc).
type Condition interface {
	CheckConcurrency(handlers int) error
}

// Refused returns the error of a handler made by Refuse or Wrap (nil for a Wrap whose error itself is a
// Condition; a refusal's never is), or nil for any other handler, which it never calls.
func Refused[H Handler[D, O], D, O any](h H) error {
	_, err, wrapped := Inspect(h)
	if _, ok := err.(Condition); ok && wrapped {
		return nil
	}
	return err
}
