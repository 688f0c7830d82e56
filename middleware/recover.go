package middleware

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
)

// ErrPanic marks the error of a recovered handler panic; test it with errors.Is.
var ErrPanic = errors.New("handler panicked")

// PanicError is the error of a recovered handler panic: the panic value and the stack of the goroutine
// that panicked, captured where it was recovered (so it holds the handler's frames even when the panic
// happened on Timeout's goroutine). errors.Is(err, ErrPanic) is true; when the panic value is an error,
// errors.Is/As reach it too. Retrieve it with errors.As.
type PanicError struct {
	// Value is what the handler passed to panic.
	Value any
	// Stack is the panicking goroutine's stack (runtime/debug.Stack format), taken inside the deferred recover.
	Stack []byte
}

// newPanicError records a recovered panic value with the stack of the calling goroutine. Call it from the
// deferred function that recovered, so that the stack still holds the panicking frames.
func newPanicError(v any) *PanicError { return &PanicError{Value: v, Stack: debug.Stack()} }

// Error returns "handler panicked: <value>".
func (e *PanicError) Error() string { return fmt.Sprintf("%s: %v", ErrPanic, e.Value) }

// Unwrap returns ErrPanic and, when the panic value is an error, that error.
func (e *PanicError) Unwrap() []error {
	if cause, ok := e.Value.(error); ok {
		return []error{ErrPanic, cause}
	}
	return []error{ErrPanic}
}

// panicRetry is the outcome of a recovered panic: a retry whose Cause, "panic", becomes the
// dead letter's reason class if the broker dead-letters it on its last delivery.
func panicRetry() consumer.Outcome {
	o := consumer.Retry(0, "panic")
	o.Cause = causelabel.Panic
	return o
}

// Recover turns a panic inside the chain into a retry (Cause "panic") whose error is a
// *PanicError wrapping ErrPanic, and logs one error line per panic with the handler's stack. A nil log
// recovers without logging. See the package doc, "Recover".
func Recover(log *zap.Logger) Middleware {
	if log == nil {
		log = zap.NewNop()
	}
	log = log.WithOptions(zap.AddStacktrace(zap.LevelEnablerFunc(func(zapcore.Level) bool { return false })))
	return Middleware{kind: kindRecover, wrap: (&recoverMW{log: log}).wrap}
}

// recoverMW is a Recover middleware; Chain knows it by its Middleware's kind.
type recoverMW struct{ log *zap.Logger }

func (w *recoverMW) wrap(next consumer.Handler) consumer.Handler {
	return &recoverHandler{log: w.log, next: next}
}

// recoverHandler is the handler a recoverMW wraps around next.
type recoverHandler struct {
	log  *zap.Logger
	next consumer.Handler
}

func (h *recoverHandler) Handle(ctx context.Context, d *consumer.Delivery) (o consumer.Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			o, err = panicRetry(), newPanicError(r)
			if d.LastAttempt() && !errors.Is(ctx.Err(), context.Canceled) {
				o = exhausted(d, o, err) // Classify, inside, did not see the panic
			}
		}
		if err != nil {
			logIfPanic(h.log, d, err)
		}
	}()
	return h.next.Handle(ctx, d)
}

// logIfPanic writes the one log line of a recovered panic when err is (or wraps) a *PanicError. It is
// called only with a non-nil error: errors.As needs its target on the heap, which the happy path skips.
func logIfPanic(log *zap.Logger, d *consumer.Delivery, err error) {
	var pe *PanicError
	if !errors.As(err, &pe) {
		return
	}
	log.Error("handler panic recovered; message will be retried",
		zap.String("group", d.Group), zap.String("topic", d.Topic), zap.String("msg_id", d.Msg.MsgId),
		zap.Any("panic", pe.Value), zap.ByteString("stack", pe.Stack))
}
