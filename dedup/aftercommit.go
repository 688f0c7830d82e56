package dedup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/rmqguard/rmqguard/internal/txproto"
)

// AfterCommit registers fn (a func(context.Context) or func(context.Context) error) to run at most once,
// after the dedup transaction in ctx commits, before the message is acknowledged: for effects whose loss is
// acceptable (the package doc, "After-commit hooks"). A failing fn is counted (WithObserver) and logged
// (WithLogger); the message stays committed. Errors: ErrNoTx when ctx carries no dedup transaction; one
// wrapping sql.ErrTxDone when the transaction already finished.
func AfterCommit[F func(context.Context) | func(context.Context) error](ctx context.Context, fn F) error {
	txn, ok := txproto.TxnFrom(ctx)
	if !ok {
		return ErrNoTx
	}
	switch f := any(fn).(type) {
	case func(context.Context):
		if f == nil {
			return errNilHook
		}
		return txn.AfterCommit(func(ctx context.Context) error { f(ctx); return nil })
	case func(context.Context) error:
		return txn.AfterCommit(f)
	}
	return nil // unreachable: F is one of the two
}

// errNilHook is AfterCommit's error for a nil fn.
var errNilHook = errors.New("dedup: AfterCommit: fn is nil")

// AfterCommit registers fn to run after the transaction commits (see the package function AfterCommit). It
// returns an error for a nil fn, or one wrapping sql.ErrTxDone when the transaction is finished.
func (t *localTx) AfterCommit(fn func(context.Context) error) error {
	if fn == nil {
		return errNilHook
	}
	return t.hooks.add(fn)
}

// Observer is told about the failures of after-commit hooks (AfterCommit), for metrics; *metrics.Metrics
// implements it. It is called on the goroutine that committed, once per failure, and must return quickly.
type Observer interface {
	// AfterCommitFailed: an after-commit hook of a transaction of group (the consumer group of the
	// message it was registered for; empty when the transaction claimed none) returned an error or
	// panicked, and its effect is lost.
	AfterCommitFailed(group string)
}

// nopObserver is the Observer of a store without WithObserver.
type nopObserver struct{}

func (nopObserver) AfterCommitFailed(string) {}

// hook is one after-commit hook and the message it was registered for (the transaction's last claim then).
type hook struct {
	fn             func(context.Context) error
	group, eventID string
}

// afterCommit is a transaction's list of after-commit hooks; closed when the transaction finishes.
type afterCommit struct {
	mu     sync.Mutex
	fns    []hook
	closed bool
	// group and eventID: the message of the transaction's last claim (claimed), given to the hooks
	// registered after it.
	group, eventID string
}

// claimed records that the transaction claimed eventID for group: the hooks registered next are its own.
func (a *afterCommit) claimed(group, eventID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.group, a.eventID = group, eventID
}

func (a *afterCommit) add(fn func(context.Context) error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return fmt.Errorf("dedup: AfterCommit: %w", sql.ErrTxDone)
	}
	a.fns = append(a.fns, hook{fn: fn, group: a.group, eventID: a.eventID})
	return nil
}

// mark returns the number of hooks registered so far (a Savepoint's mark).
func (a *afterCommit) mark() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.fns)
}

// truncate drops the hooks registered after mark n (a rollback to a savepoint).
func (a *afterCommit) truncate(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n < len(a.fns) {
		clear(a.fns[n:])
		a.fns = a.fns[:n]
	}
}

// close refuses further hooks and returns those registered.
func (a *afterCommit) close() []hook {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	fns := a.fns
	a.fns = nil
	return fns
}

// Messages of the lines that report a lost after-commit effect (one per failure, at error level).
const (
	msgHookFailed   = "after-commit hook failed; its effect is lost, the transaction stays committed"
	msgHookPanicked = "after-commit hook panicked; its effect is lost, the transaction stays committed"
)

// run calls each hook in order. A hook that returns an error or panics does not stop the others; each such
// failure is counted on obs and logged on log (with the panic's stack), never sampled away (logUnsampled).
func (a *afterCommit) run(ctx context.Context, log *zap.Logger, obs Observer, fns []hook) {
	for i, h := range fns {
		err, rec, stack := call(ctx, h.fn)
		if err == nil && rec == nil {
			continue
		}
		obs.AfterCommitFailed(h.group)
		fields := []zap.Field{zap.String("group", h.group), zap.String("event_id", h.eventID), zap.Int("hook", i)}
		if rec != nil {
			logUnsampled(log, msgHookPanicked, append(fields, zap.Any("panic", rec), zap.String("stack", stack))...)
			continue
		}
		logUnsampled(log, msgHookFailed, append(fields, zap.Error(err))...)
	}
}

// call runs fn and returns its error, or the value of its panic (recovered) and the stack.
func call(ctx context.Context, fn func(context.Context) error) (err error, rec any, stack string) {
	defer func() {
		if rec = recover(); rec != nil {
			stack = string(stackTrace())
		}
	}()
	return fn(ctx), nil, ""
}

// stackTrace returns the calling goroutine's stack.
func stackTrace() []byte {
	buf := make([]byte, 16<<10)
	return buf[:runtime.Stack(buf, false)]
}

// logUnsampled logs msg at error level on log even when log's core would drop it: zap's sampler (which
// zap.NewProduction and zap.NewProductionConfig install on every level) keeps, per second and per level and
// message text, the first 100 lines and one in 100 after that, and a burst of lost effects shares one text.
// The line is checked as usual (level, sampling, hooks); when the core is enabled at error level but its
// Check drops the line, it is written to the core directly, which zapcore.Core's contract says always logs.
func logUnsampled(log *zap.Logger, msg string, fields ...zap.Field) {
	ent := zapcore.Entry{Level: zapcore.ErrorLevel, Time: time.Now(), LoggerName: log.Name(), Message: msg}
	if pc, file, line, ok := runtime.Caller(1); ok {
		ent.Caller = zapcore.NewEntryCaller(pc, file, line, true)
	}
	core := log.Core()
	if ce := core.Check(ent, nil); ce != nil {
		ce.Write(fields...)
		return
	}
	if core.Enabled(zapcore.ErrorLevel) {
		_ = core.Write(ent, fields)
	}
}
