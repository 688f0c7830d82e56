// Package pending carries the error of a handler that is not ready to run to consumer.New, which refuses
// it where the consumer is built instead of failing messages. It works on any handler type of the shape
// an interface with the method Handle(context.Context, *D) (O, error): H is consumer.Handler, D consumer.Delivery, O consumer.Outcome.
//
// Refuse returns a handler that stands for one which could not be built, because of err (e.g.
// dedup.Handle(nil)): consumer.New given it (or given a refused handler outermost) returns err wrapped as
// "consumer.New: handler: <err>", so the mistake fails at construction. New recognises it by its type,
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
// Inspect returns what Refuse or Wrap put in a handler, recognising their results by their types.
package pending

import (
	"context"
	"errors"
)

// Handler is the shape of the handlers this package works on (consumer.Handler).
type Handler[D, O any] interface {
	Handle(ctx context.Context, d *D) (O, error)
}

// errNoReason is the error of a refusal or a wrapped handler without a reason.
var errNoReason = errors.New("handler refused without a reason")

// refusal is a handler that could not be built: err says why, deadLetter makes its outcome on a message.
type refusal[D, O any] struct {
	err        error
	deadLetter func(reason string) O
}

// Handle dead-letters a message that reached a refused handler (a chain that bypassed New's check, e.g. a
// refused handler wrapped by hand) with the refusal's error as the reason.
func (r *refusal[D, O]) Handle(context.Context, *D) (O, error) {
	return r.deadLetter("handler could not be built: " + r.err.Error()), nil
}

// Refuse returns an H standing for a handler that could not be built because of err; deadLetter
// (consumer.DeadLetter) makes its outcome should it run on a message. See the package doc.
func Refuse[D, O any](err error, deadLetter func(reason string) O) Handler[D, O] {
	if err == nil {
		err = errNoReason
	}
	return &refusal[D, O]{err: err, deadLetter: deadLetter}
}

// wrapped is a handler that runs but that New refuses: h is the handler, err why it is not complete.
type wrapped[D, O any] struct {
	h   Handler[D, O]
	err error
}

// Handle runs the wrapped handler.
func (w *wrapped[D, O]) Handle(ctx context.Context, d *D) (O, error) { return w.h.Handle(ctx, d) }

// Wrap returns an H that runs h (not nil) but that New refuses with err: a part of a handler incomplete
// alone and meant to be completed by what wraps it, or h with a condition on the consumer. See the package
// doc.
func Wrap[D, O any](h Handler[D, O], err error) Handler[D, O] {
	if err == nil {
		err = errNoReason
	}
	return &wrapped[D, O]{h: h, err: err}
}

// Inspect returns the error of a handler made by Refuse or Wrap with, for Wrap's, the handler it runs
// (wrapped true); for any other handler, which it never calls, nil, nil and false.
func Inspect[D, O any](h Handler[D, O]) (inner Handler[D, O], err error, isWrapped bool) {
	switch p := h.(type) {
	case *refusal[D, O]:
		return nil, p.err, false
	case *wrapped[D, O]:
		return p.h, p.err, true
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
func Refused[D, O any](h Handler[D, O]) error {
	_, err, wrapped := Inspect(h)
	if _, ok := err.(Condition); ok && wrapped {
		return nil
	}
	return err
}
