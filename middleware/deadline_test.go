package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
)

// honoursCtx is a slow handler that honours its context: it returns when the context ends, with its error.
func honoursCtx(ctx context.Context, _ *consumer.Delivery) (consumer.Outcome, error) {
	<-ctx.Done()
	return consumer.Outcome{}, ctx.Err()
}

// slowHandler is a handler that outlives its context, for the middleware named: for Deadline one that
// honours it (the inline form waits for the handler); for Timeout one that returns only after the test
// ends, so that Timeout's answer cannot be the handler's own (its select would pick either at random).
func slowHandler(t *testing.T, middlewareName string) consumer.Handler {
	if !strings.HasPrefix(middlewareName, "Timeout") {
		return consumer.HandlerFunc(honoursCtx)
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		<-release
		return consumer.Outcome{}, ctx.Err()
	})
}

// requireTimedOut checks the outcome of a run that missed its deadline and returns the error's text.
func requireTimedOut(t *testing.T, o consumer.Outcome, err error) string {
	t.Helper()
	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.Equal(t, causelabel.Timeout, o.Cause)
	assert.Equal(t, "handler timeout", o.Reason)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, rmq.ConsumeRetryLater, testenv.AnswerTo(t, o, err).Result)
	return err.Error()
}

func TestDeadline_F7_HandlerHonouringItsContextEndsAtTheDeadline(t *testing.T) {
	var cause error
	h := middleware.Deadline(20 * time.Millisecond).Wrap(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		o, err := honoursCtx(ctx, d)
		cause = context.Cause(ctx)
		return o, fmt.Errorf("claim: %w", err)
	}))

	o, err := h.Handle(context.Background(), delivery("ORDER", "", nil))

	msg := requireTimedOut(t, o, err)
	assert.Contains(t, msg, "handler returned after its deadline, middleware.Deadline(20ms)")
	assert.Contains(t, msg, "(the handler returned: claim: context deadline exceeded)", "the handler's own error is kept as text")
	require.ErrorIs(t, cause, context.DeadlineExceeded, "the handler's context carries the deadline")
	assert.Contains(t, cause.Error(), "middleware.Deadline(20ms) fired", "context.Cause names the deadline too")
}

// The inline form cannot return before a handler that ignores its context does; it returns when the
// handler does, with the timeout outcome, whatever the handler said.
func TestDeadline_F7_HandlerIgnoringItsContextReturnsLateWithTheTimeoutOutcome(t *testing.T) {
	finished := false
	h := middleware.Deadline(10 * time.Millisecond).Wrap(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		time.Sleep(60 * time.Millisecond) // ignores ctx
		finished = true
		return consumer.Processed(), nil
	}))

	o, err := h.Handle(context.Background(), delivery("ORDER", "", nil))

	assert.True(t, finished, "the handler ran on the caller's goroutine to its end")
	msg := requireTimedOut(t, o, err)
	assert.Contains(t, msg, "middleware.Deadline(10ms)")
	assert.NotContains(t, msg, "the handler returned", "no handler error to report")
}

// The goroutine form returns at the deadline while the handler that ignores its context is still running.
func TestTimeout_F7_ReturnsAtTheDeadlineWhileTheHandlerStillRuns(t *testing.T) {
	release := make(chan struct{})
	finished := make(chan struct{})
	h := middleware.Timeout(10 * time.Millisecond).Wrap(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		defer close(finished)
		<-release // ignores ctx
		return consumer.Processed(), nil
	}))

	o, err := h.Handle(context.Background(), delivery("ORDER", "", nil))

	select {
	case <-finished:
		t.Fatal("Timeout returned only after the handler did")
	default:
	}
	close(release)
	<-finished
	msg := requireTimedOut(t, o, err)
	assert.Contains(t, msg, "handler did not return before its deadline, middleware.Timeout(10ms)")
}

// The error names the deadline that fired. Here the parent's (the consumer's HandlerTimeout) is
// earlier than the middleware's, for both forms; Timeout(0) used to report "timeout 0s".
func TestDeadline_F7_ErrorNamesTheParentsDeadlineWhenThatFired(t *testing.T) {
	for name, mw := range map[string]middleware.Middleware{
		"Deadline(1h)": middleware.Deadline(time.Hour), "Deadline(0)": middleware.Deadline(0),
		"Timeout(1h)": middleware.Timeout(time.Hour), "Timeout(0)": middleware.Timeout(0),
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()

			o, err := mw.Wrap(slowHandler(t, name)).Handle(ctx, delivery("ORDER", "", nil))

			msg := requireTimedOut(t, o, err)
			assert.Contains(t, msg, "the parent context's (the consumer's HandlerTimeout: ")
			assert.NotContains(t, msg, "fired", "the middleware's own deadline did not fire")
		})
	}
}

func TestDeadline_ParentCancelledIsHandlerCancelledNotATimeout(t *testing.T) {
	for name, mw := range map[string]middleware.Middleware{"Deadline": middleware.Deadline(time.Hour), "Timeout": middleware.Timeout(time.Hour)} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			slow := slowHandler(t, name)
			h := mw.Wrap(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
				cancel() // the consumer is stopping
				return slow.Handle(ctx, d)
			}))

			o, err := h.Handle(ctx, delivery("ORDER", "", nil))

			assert.Equal(t, consumer.Retry(0, "handler cancelled"), o)
			require.ErrorIs(t, err, context.Canceled)
			assert.NotErrorIs(t, err, context.DeadlineExceeded)
		})
	}
}

func TestDeadline_ResultBeforeTheDeadlinePassesThroughUnderTheEarlierDeadline(t *testing.T) {
	cause := errors.New("rejected")
	var got time.Time
	h := middleware.Deadline(time.Minute).Wrap(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		got, _ = ctx.Deadline()
		return consumer.DeadLetter("bad payload"), cause
	}))
	before := time.Now()

	o, err := h.Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.DeadLetter("bad payload"), o)
	assert.Same(t, cause, err)
	assert.WithinRange(t, got, before.Add(time.Minute), time.Now().Add(time.Minute), "the middleware's own deadline")

	parent, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	want, _ := parent.Deadline()
	_, _ = h.Handle(parent, delivery("ORDER", "", nil))
	assert.True(t, got.Equal(want), "the parent's earlier deadline %v is kept, got %v", want, got)
}

// A late error cannot change the message's class: a permanent error returned after the deadline is a
// timeout retry, as Timeout, which never sees it, would report.
func TestDeadline_LateErrorIsKeptAsTextAndDoesNotClassify(t *testing.T) {
	h := testenv.Must(middleware.Chain(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		<-ctx.Done()
		return consumer.Outcome{}, retry.Permanent(errors.New("invalid payload"))
	}), middleware.Classify(), middleware.Deadline(10*time.Millisecond)))

	o, err := h.Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.KindRetry, o.Kind, "not dead-lettered as permanent")
	assert.Equal(t, causelabel.Timeout, o.Cause)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, retry.ClassTransient, retry.Classify(err))
	assert.Contains(t, err.Error(), "(the handler returned: invalid payload)")
}

// F28 with Deadline: the handler runs on the caller's goroutine, so its panic reaches Recover, which logs
// the handler's own frame.
func TestRecover_F28_PanicUnderDeadlineKeepsTheHandlersStackInTheLog(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	h := testenv.Must(middleware.Chain(consumer.HandlerFunc(panickingOrderHandler), middleware.Recover(zap.New(core)), middleware.Classify(), middleware.Deadline(time.Hour)))

	o, err := h.Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.Equal(t, causelabel.Panic, o.Cause)
	require.ErrorIs(t, err, middleware.ErrPanic)
	require.Equal(t, 1, logs.Len(), "one log line per panic")
	stack, _ := logs.All()[0].ContextMap()["stack"].(string)
	assert.Contains(t, stack, "middleware_test.panickingOrderHandler", "the handler's frame is in the logged stack")
	assert.Contains(t, stack, "panic(", "the stack was taken while panicking")
}

// The handler's error is left out when it is the context's own error, which the message already says.
func TestDeadline_HandlerReturningTheContextsErrorIsNotRepeated(t *testing.T) {
	o, err := middleware.Deadline(10*time.Millisecond).Wrap(consumer.HandlerFunc(honoursCtx)).Handle(context.Background(), delivery("ORDER", "", nil))

	msg := requireTimedOut(t, o, err)
	assert.Equal(t, "handler returned after its deadline, middleware.Deadline(10ms): context deadline exceeded", msg)
}

// F39's rule keeps a committed outcome after the deadline, and only one: a dead letter or retry returned
// late with Committed set (by a handler; Dedup sets it only on an outcome it committed, which acknowledges
// the message) is a timeout retry, as any late decision is, not a dead letter at once.
func TestDeadline_LateOutcomeThatDoesNotAcknowledgeIsATimeoutEvenIfMarkedCommitted(t *testing.T) {
	for _, late := range []consumer.Outcome{consumer.DeadLetter("decided late"), consumer.Retry(3, "decided late")} {
		t.Run(late.Kind.String(), func(t *testing.T) {
			late.Committed = true
			h := testenv.Must(middleware.Chain(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
				<-ctx.Done()
				return late, nil
			}), middleware.Classify(), middleware.Deadline(10*time.Millisecond)))

			o, err := h.Handle(context.Background(), delivery("ORDER", "", nil))

			assert.Equal(t, consumer.KindRetry, o.Kind, "%s", o)
			assert.Equal(t, causelabel.Timeout, o.Cause)
			require.ErrorIs(t, err, context.DeadlineExceeded)
		})
	}
}
