package e2e

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// handlerCall is what one handler call saw.
type handlerCall struct {
	attempt, reconsumeTimes, maxAttempts int
	hasDeadline                          bool
	deadlineIn                           time.Duration // deadline minus the call's start
	ctxErr                               error         // the context's error when the call gave up; nil if it did not wait
}

// TestE2E_F7_F5_HandlerTimeoutAndMaxAttemptsReachTheHandler checks consumer.Config.HandlerTimeout and
// MaxAttempts through the real broker, with no middleware.Timeout in the chain: the first delivery's
// handler blocks until its context ends, which happens at HandlerTimeout (1 s) with DeadlineExceeded; the
// message is retried and its second delivery succeeds. Every Delivery the handler sees carries
// MaxAttempts = Config.MaxAttempts and Attempt = the message's ReconsumeTimes; nothing is dead-lettered.
func TestE2E_F7_F5_HandlerTimeoutAndMaxAttemptsReachTheHandler(t *testing.T) {
	w := newWorld(t, 1)
	const handlerTimeout = time.Second
	const maxAttempts = 2

	var mu sync.Mutex
	var calls []handlerCall
	done := make(chan struct{})
	handler := testenv.Must(middleware.Chain(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		start := time.Now()
		deadline, ok := ctx.Deadline()
		call := handlerCall{attempt: d.Attempt, reconsumeTimes: int(d.Msg.ReconsumeTimes), maxAttempts: d.MaxAttempts,
			hasDeadline: ok, deadlineIn: deadline.Sub(start)}
		var o consumer.Outcome
		var err error
		if d.Attempt == 0 {
			select { // a slow handler that honours its context
			case <-ctx.Done():
				call.ctxErr, err = ctx.Err(), ctx.Err()
			case <-time.After(10 * handlerTimeout): // the context never ended: HandlerTimeout was not applied
				err = errors.New("the context did not end within 10 × HandlerTimeout")
			}
		} else {
			o = consumer.Processed()
		}
		mu.Lock()
		calls = append(calls, call)
		mu.Unlock()
		if err == nil {
			close(done)
		}
		return o, err
	}), middleware.Classify()))
	c := w.start(consumer.Config{HandlerTimeout: handlerTimeout, MaxAttempts: maxAttempts, DrainTimeout: 5 * time.Second}, handler)

	msg := primitive.NewMessage(w.topic, []byte(`{}`))
	msg.WithProperty("EVENT_ID", w.run+"-slow")
	w.send(msg)
	select {
	case <-done:
	case <-w.ctx.Done():
		t.Fatal("the message was never handled successfully")
	}
	require.NoError(t, c.Shutdown(w.ctx))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, calls, 2, "one delivery cut off at HandlerTimeout, one retry: %+v", calls)
	first, second := calls[0], calls[1]
	assert.Equal(t, 0, first.attempt)
	assert.Equal(t, 1, second.attempt, "the timed-out message was retried through %%RETRY%%")
	for _, c := range calls {
		assert.Equal(t, c.reconsumeTimes, c.attempt, "Attempt is ReconsumeTimes")
		assert.Equal(t, maxAttempts, c.maxAttempts, "the Delivery carries Config.MaxAttempts")
		assert.True(t, c.hasDeadline, "the handler's context has a deadline")
		assert.Positive(t, c.deadlineIn)
		assert.LessOrEqual(t, c.deadlineIn, handlerTimeout, "the deadline is HandlerTimeout from the start, not the 30 s default")
	}
	assert.ErrorIs(t, first.ctxErr, context.DeadlineExceeded, "the first delivery's context ended at its deadline")
	w.requireNoDeadLetters()
}
