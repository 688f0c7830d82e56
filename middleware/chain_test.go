package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
)

// record returns a middleware that appends name to *log before and name+"/after" after the inner handler.
func record(name string, log *[]string) middleware.Middleware {
	return middleware.Func(func(next consumer.Handler) consumer.Handler {
		return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			*log = append(*log, name)
			o, err := next.Handle(ctx, d)
			*log = append(*log, name+"/after")
			return o, err
		})
	})
}

// returning is a handler that returns o and err.
func returning(o consumer.Outcome, err error) consumer.Handler {
	return consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) { return o, err })
}

func TestChain_FirstMiddlewareIsOutermost(t *testing.T) {
	var log []string
	h := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		log = append(log, "handler")
		return consumer.Processed(), nil
	}

	o, err := testenv.Must(middleware.Chain(consumer.HandlerFunc(h), record("a", &log), record("b", &log), record("c", &log))).Handle(context.Background(), delivery("ORDER", "", nil))

	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, []string{"a", "b", "c", "handler", "c/after", "b/after", "a/after"}, log)
}

func TestChain_NoMiddlewaresIsTheHandler(t *testing.T) {
	o, err := testenv.Must(middleware.Chain(returning(consumer.Stale("v5 < v7"), nil))).Handle(context.Background(), delivery("ORDER", "", nil))

	require.NoError(t, err)
	assert.Equal(t, consumer.Stale("v5 < v7"), o)
}

func TestRecover_F2_PanicBecomesRetryWithErrPanic(t *testing.T) {
	h := middleware.Recover(zap.NewNop()).Wrap(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		panic("nil map write in p-1")
	}))

	var o consumer.Outcome
	var err error
	require.NotPanics(t, func() {
		o, err = h.Handle(context.Background(), delivery("ORDER", "", map[string]string{"KEYS": "p-1"}))
	})

	assert.Equal(t, consumer.KindRetry, o.Kind)
	require.ErrorIs(t, err, middleware.ErrPanic)
	assert.Contains(t, err.Error(), "nil map write in p-1", "the panic value is part of the error")
	assert.Equal(t, rmq.ConsumeRetryLater, testenv.AnswerTo(t, o, err).Result)
}

// A handler that panics on every delivery: on the last one the standard chain's outcome is a dead letter
// with its reason ("retries exhausted …: panic", Cause "panic"), which the consumer publishes with that
// reason, not a retry the broker would move to the DLQ without one. Classify sits inside Recover, so Recover
// makes it; a consumer shutting down (ctx cancelled) keeps the retry.
func TestRecover_PanicOnTheLastDeliveryIsADeadLetterWithItsReason(t *testing.T) {
	_, dedupMW := newDedup(t)
	eventID := testenv.Must(middleware.EventID(middleware.EventIDConfig{}))
	h := testenv.Must(middleware.Chain(dedup.Handle(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
		panic("nil map write")
	}), middleware.Recover(zap.NewNop()), middleware.Classify(), eventID, middleware.Deadline(0), dedupMW))
	last := func() *consumer.Delivery {
		d := delivery("ORDER", "", map[string]string{"EVENT_ID": testenv.Unique("evt")})
		d.Attempt, d.MaxAttempts = 2, 2
		return d
	}

	o, err := h.Handle(context.Background(), last())
	require.ErrorIs(t, err, middleware.ErrPanic)
	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Equal(t, "retries exhausted after 3 deliveries: panic", o.Reason)
	assert.Equal(t, "panic", o.Cause)

	notLast := last()
	notLast.Attempt = 1
	o, err = h.Handle(context.Background(), notLast)
	require.ErrorIs(t, err, middleware.ErrPanic)
	assert.Equal(t, consumer.KindRetry, o.Kind, "not the last delivery: a retry")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o, _ = h.Handle(ctx, last())
	assert.Equal(t, consumer.KindRetry, o.Kind, "shutting down: not answered as a dead letter")
}

func TestRecover_PanicWithErrorValueKeepsItReachable(t *testing.T) {
	cause := errors.New("boom")
	h := middleware.Recover(zap.NewNop()).Wrap(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		panic(cause)
	}))

	o, err := h.Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.ErrorIs(t, err, middleware.ErrPanic)
	assert.Contains(t, err.Error(), "boom")
}

func TestRecover_NoPanicPassesThrough(t *testing.T) {
	cause := errors.New("db down")
	o, err := middleware.Recover(zap.NewNop()).Wrap(returning(consumer.Retry(4, "db down"), cause)).Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.Retry(4, "db down"), o)
	assert.Same(t, cause, err)
}

func TestTimeout_F7_HandlerIgnoringContextIsRetried(t *testing.T) {
	release := make(chan struct{})
	finished := make(chan struct{})
	h := middleware.Timeout(20 * time.Millisecond).Wrap(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		defer close(finished)
		<-release // ignores ctx on purpose, like a hung handler
		return consumer.Processed(), nil
	}))

	o, err := h.Handle(context.Background(), delivery("ORDER", "", nil))
	close(release)
	<-finished // the late handler's goroutine ends once the handler returns

	assert.Equal(t, consumer.KindRetry, o.Kind, "a hung handler is never acknowledged")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, rmq.ConsumeRetryLater, testenv.AnswerTo(t, o, err).Result)
}

func TestTimeout_F7_HandlerContextIsCancelledAtTheDeadline(t *testing.T) {
	sawErr := make(chan error, 1)
	h := middleware.Timeout(20 * time.Millisecond).Wrap(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		<-ctx.Done()
		sawErr <- ctx.Err()
		return consumer.Outcome{}, ctx.Err()
	}))

	o, err := h.Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, <-sawErr, context.DeadlineExceeded, "the handler's own context carries the deadline")
}

func TestTimeout_KeepsAnEarlierParentDeadline(t *testing.T) {
	parentDeadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), parentDeadline)
	defer cancel()
	var got time.Time
	var ok bool
	h := middleware.Timeout(24 * time.Hour).Wrap(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		got, ok = ctx.Deadline()
		return consumer.Processed(), nil
	}))

	o, err := h.Handle(ctx, delivery("ORDER", "", nil))

	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	require.True(t, ok)
	assert.True(t, got.Equal(parentDeadline), "deadline %v, want the parent's %v", got, parentDeadline)
}

func TestTimeout_FastHandlerResultPassesThrough(t *testing.T) {
	cause := errors.New("rejected")
	o, err := middleware.Timeout(time.Hour).Wrap(returning(consumer.DeadLetter("bad payload"), cause)).Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.DeadLetter("bad payload"), o)
	assert.Same(t, cause, err)
}

func TestTimeout_F2_PanicInHandlerGoroutineIsErrPanic(t *testing.T) {
	h := middleware.Timeout(time.Hour).Wrap(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		panic("index out of range")
	}))

	var o consumer.Outcome
	var err error
	require.NotPanics(t, func() { o, err = h.Handle(context.Background(), delivery("ORDER", "", nil)) })

	assert.Equal(t, consumer.KindRetry, o.Kind)
	require.ErrorIs(t, err, middleware.ErrPanic)
	assert.Contains(t, err.Error(), "index out of range")
}

func TestClassify_PermanentErrorIsDeadLetter(t *testing.T) {
	cause := fmt.Errorf("handler: %w", retry.Permanent(errors.New("unknown event type Foo")))

	o, err := middleware.Classify().Wrap(returning(consumer.Outcome{}, cause)).Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Contains(t, o.Reason, "unknown event type Foo", "the error is the DLQ reason")
	assert.Same(t, cause, err, "the error is passed on for logging")
	res := testenv.AnswerTo(t, o, err)
	assert.Equal(t, rmq.ConsumeRetryLater, res.Result)
	assert.Equal(t, testenv.DelayLevelDLQ, res.DelayLevel)
}

func TestClassify_F1_PlainErrorIsRetry(t *testing.T) {
	cause := errors.New("db down")

	o, err := middleware.Classify().Wrap(returning(consumer.Outcome{}, cause)).Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.Equal(t, 0, o.DelayLevel)
	assert.Equal(t, "db down", o.Reason)
	assert.Same(t, cause, err)
}

func TestClassify_F1_ErrorWithProcessedOutcomeIsRetry(t *testing.T) {
	o, err := middleware.Classify().Wrap(returning(consumer.Processed(), errors.New("commit failed"))).Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.Error(t, err)
}

func TestClassify_F15_DeadlockIsRetryNeverDeadLetter(t *testing.T) {
	cause := fmt.Errorf("reserve: %w", &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"})

	o, err := middleware.Classify().Wrap(returning(consumer.Outcome{}, cause)).Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.ErrorIs(t, err, cause)
}

func TestClassify_KeepsTheInnerDelayLevel(t *testing.T) {
	o, _ := middleware.Classify().Wrap(returning(consumer.Retry(5, "busy"), errors.New("busy"))).Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.Equal(t, 5, o.DelayLevel)
}

func TestClassify_KeepsAnInnerDeadLetter(t *testing.T) {
	// A dead letter decided inside (e.g. by EventID) stays one even when its error classifies as transient.
	in := consumer.DeadLetter("no event id")
	o, err := middleware.Classify().Wrap(returning(in, context.DeadlineExceeded)).Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Equal(t, in.Reason, o.Reason)
	assert.Equal(t, causelabel.Permanent, o.Cause, "a dead letter decided inside is permanent; its class is filled in")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestClassify_InnerDeadLetterOfAnUnidentifiableMessageIsClassedSo(t *testing.T) {
	eid, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	h := testenv.Must(middleware.Chain(returning(consumer.Processed(), nil), middleware.Classify(), eid))

	o, err := h.Handle(context.Background(), delivery("ORDER", "", nil))

	require.ErrorIs(t, err, middleware.ErrUnidentifiable)
	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Equal(t, causelabel.Unidentifiable, o.Cause)
}

func TestClassify_NilErrorLeavesOutcomeUntouched(t *testing.T) {
	for _, in := range []consumer.Outcome{consumer.Processed(), consumer.Duplicate(), consumer.Stale("old"), consumer.Retry(3, "later"), {}} {
		t.Run(fmt.Sprint(in.Kind, " ", in.Reason), func(t *testing.T) {
			o, err := middleware.Classify().Wrap(returning(in, nil)).Handle(context.Background(), delivery("ORDER", "", nil))
			require.NoError(t, err)
			assert.Equal(t, in, o)
		})
	}
}

// F5: on the last delivery (Attempt == MaxAttempts) a retry would make the broker dead-letter the message
// silently; Classify dead-letters it itself, with the reason, so it is counted and the DLQ entry says why.
func TestClassify_F5_LastAttemptRetryBecomesDeadLetterWithReason(t *testing.T) {
	for name, in := range map[string]struct {
		o   consumer.Outcome
		err error
	}{
		"error":        {consumer.Outcome{}, errors.New("db down")},
		"asked retry":  {consumer.Retry(3, "rate limited"), nil},
		"zero outcome": {consumer.Outcome{}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			last := delivery("ORDER", "", nil)
			last.MaxAttempts, last.Attempt = 3, 3

			o, err := middleware.Classify().Wrap(returning(in.o, in.err)).Handle(context.Background(), last)

			assert.Equal(t, consumer.KindDeadLetter, o.Kind)
			assert.Contains(t, o.Reason, "retries exhausted after 4 deliveries")
			assert.Equal(t, in.err, err)
			res := testenv.AnswerTo(t, o, err)
			assert.Equal(t, testenv.DelayLevelDLQ, res.DelayLevel)
		})
	}
}

func TestClassify_F5_EarlierAttemptsAreRetried(t *testing.T) {
	d := delivery("ORDER", "", nil)
	d.MaxAttempts, d.Attempt = 3, 2

	o, _ := middleware.Classify().Wrap(returning(consumer.Outcome{}, errors.New("db down"))).Handle(context.Background(), d)

	assert.Equal(t, consumer.KindRetry, o.Kind)
}

func TestClassify_F5_SuccessOnTheLastAttemptStaysSuccess(t *testing.T) {
	d := delivery("ORDER", "", nil)
	d.MaxAttempts, d.Attempt = 3, 3

	o, err := middleware.Classify().Wrap(returning(consumer.Processed(), nil)).Handle(context.Background(), d)

	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
}

// panickingOrderHandler is a named handler so that the test can find its frame in the logged stack.
func panickingOrderHandler(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
	var stock map[string]int
	stock["sku-1"]-- // assignment to entry in nil map
	return consumer.Processed(), nil
}

// F28: with Timeout inside Recover the panic happens on Timeout's goroutine; Timeout recovers it there
// and returns it, so Recover cannot recover it itself. The panic is still a retry, counted as a panic,
// and the log line carries the panicking goroutine's stack: the handler's own frame, not only the
// recover site.
func TestRecover_F28_PanicUnderTimeoutKeepsTheHandlersStackInTheLog(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	d := delivery("ORDER", "", map[string]string{"KEYS": "p-1"})
	h := testenv.Must(middleware.Chain(consumer.HandlerFunc(panickingOrderHandler), middleware.Recover(zap.New(core)), middleware.Timeout(time.Hour)))

	o, err := h.Handle(context.Background(), d)

	assert.Equal(t, consumer.KindRetry, o.Kind)
	require.ErrorIs(t, err, middleware.ErrPanic)
	var pe *middleware.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, string(pe.Stack), "panickingOrderHandler")
	assert.Equal(t, rmq.ConsumeRetryLater, testenv.AnswerTo(t, o, err).Result)
	require.Equal(t, 1, logs.Len(), "one log line per panic")
	entry := logs.All()[0]
	assert.Equal(t, zapcore.ErrorLevel, entry.Level)
	fields := entry.ContextMap()
	stack, _ := fields["stack"].(string)
	assert.Contains(t, stack, "middleware_test.panickingOrderHandler", "the handler's frame is in the logged stack")
	assert.Contains(t, stack, "panic(", "the stack was taken while panicking")
	assert.Contains(t, fmt.Sprint(fields["panic"]), "assignment to entry in nil map")
	assert.Equal(t, "cg", fields["group"])
	assert.Equal(t, "ORDER", fields["topic"])
	assert.Equal(t, d.Msg.MsgId, fields["msg_id"])
}

// F28 without Timeout: Recover recovers the panic itself and logs the same stack.
func TestRecover_F28_PanicRecoveredDirectlyLogsTheHandlersStack(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)

	o, err := middleware.Recover(zap.New(core)).Wrap(consumer.HandlerFunc(panickingOrderHandler)).Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.KindRetry, o.Kind)
	require.ErrorIs(t, err, middleware.ErrPanic)
	require.Equal(t, 1, logs.Len())
	stack, _ := logs.All()[0].ContextMap()["stack"].(string)
	assert.Contains(t, stack, "middleware_test.panickingOrderHandler")
}

// A non-panic error passing through Recover is not logged by it (the consumer logs every message's
// decision once).
func TestRecover_PlainErrorIsNotLoggedAsAPanic(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)

	_, err := middleware.Recover(zap.New(core)).Wrap(returning(consumer.Outcome{}, errors.New("db down"))).Handle(context.Background(), delivery("ORDER", "", nil))

	require.Error(t, err)
	assert.NotErrorIs(t, err, middleware.ErrPanic)
	assert.Zero(t, logs.Len())
}
