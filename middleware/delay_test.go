package middleware_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/middleware"
)

// The retries Recover and Timeout decide: kind retry, delay level 0 (the broker's schedule by
// ReconsumeTimes), a reason that says what happened, and the cause that becomes the dead letter's reason
// class should the broker dead-letter the retry on the last delivery (panic, timeout). The handlers ignore their context, so Timeout
// decides, not the handler's own return.
func TestRecoverAndTimeout_F2_F7_RetriesAskForDelayLevelZero(t *testing.T) {
	panics := func(context.Context, *consumer.Delivery) (consumer.Outcome, error) { panic("boom") }
	release := make(chan struct{})
	returned := make(chan struct{}, 2)
	ignoresCtx := func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		defer func() { returned <- struct{}{} }()
		<-release
		return consumer.Processed(), nil
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	d := delivery("ORDER", "", nil)

	recovered, _ := middleware.Recover(zap.NewNop()).Wrap(consumer.HandlerFunc(panics)).Handle(context.Background(), d)
	timeoutPanic, _ := middleware.Timeout(time.Hour).Wrap(consumer.HandlerFunc(panics)).Handle(context.Background(), d)
	timedOut, _ := middleware.Timeout(time.Millisecond).Wrap(consumer.HandlerFunc(ignoresCtx)).Handle(context.Background(), d)
	stopped, _ := middleware.Timeout(time.Hour).Wrap(consumer.HandlerFunc(ignoresCtx)).Handle(cancelled, d)
	close(release)
	<-returned
	<-returned

	assert.Equal(t, withCause(consumer.Retry(0, "panic"), causelabel.Panic), recovered)
	assert.Equal(t, withCause(consumer.Retry(0, "panic"), causelabel.Panic), timeoutPanic)
	assert.Equal(t, withCause(consumer.Retry(0, "handler timeout"), causelabel.Timeout), timedOut)
	assert.Equal(t, consumer.Retry(0, "handler cancelled"), stopped, "a cancellation by Shutdown is not a timeout")
}

// withCause returns o with its Cause set to c.
func withCause(o consumer.Outcome, c string) consumer.Outcome {
	o.Cause = c
	return o
}
