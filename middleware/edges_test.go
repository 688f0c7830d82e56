package middleware_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/middleware"
)

// F5: the "retries exhausted" reason says what the last delivery ended with: the retry's own reason, or
// "no outcome" when the chain decided nothing.
func TestClassify_F5_ExhaustedReasonNamesTheLastFailure(t *testing.T) {
	for want, in := range map[string]consumer.Outcome{
		"retries exhausted after 4 deliveries: no outcome":   {},
		"retries exhausted after 4 deliveries: rate limited": consumer.Retry(3, "rate limited"),
	} {
		t.Run(want, func(t *testing.T) {
			d := delivery("ORDER", "", nil)
			d.MaxAttempts, d.Attempt = 3, 3

			o, err := middleware.Classify().Wrap(returning(in, nil)).Handle(context.Background(), d)

			require.NoError(t, err)
			letter := consumer.DeadLetter(want)
			letter.Cause = causelabel.Exhausted
			assert.Equal(t, letter, o)
		})
	}
}

// F11: FromKeys on a message without KEYS finds nothing and the next extractor is tried.
func TestEventID_F11_NoKeysFallsThroughToTheNextExtractor(t *testing.T) {
	cfg := middleware.EventIDConfig{Extractors: []middleware.Extractor{middleware.FromKeys(), middleware.FromProperty("EVENT_ID")}}

	_, err, s := runEventID(t, cfg, delivery("ORDER", "", map[string]string{"EVENT_ID": "evt-1"}))

	require.NoError(t, err)
	require.Len(t, s.got, 1)
	assert.Equal(t, "evt-1", s.got[0].EventID)
}

// Integer event IDs keep every digit, 0 and 9 included.
func TestEventID_F11_IntegerIDsWithEveryDigit(t *testing.T) {
	cfg := middleware.EventIDConfig{Extractors: []middleware.Extractor{middleware.FromJSONField("id")}}
	for body, want := range map[string]string{`{"id":0}`: "0", `{"id":1234567890}`: "1234567890", `{"id":900}`: "900"} {
		t.Run(body, func(t *testing.T) {
			_, err, s := runEventID(t, cfg, delivery("ORDER", body, nil))
			require.NoError(t, err)
			require.Len(t, s.got, 1)
			assert.Equal(t, want, s.got[0].EventID)
		})
	}
}

// MaxLength 1 is the smallest accepted: a one-character ID passes, two characters are unidentifiable.
func TestEventID_MaxLengthOneIsAccepted(t *testing.T) {
	cfg := middleware.EventIDConfig{MaxLength: 1}

	_, err, s := runEventID(t, cfg, delivery("ORDER", "", map[string]string{"EVENT_ID": "7"}))
	require.NoError(t, err)
	require.Len(t, s.got, 1)

	o, err, s := runEventID(t, cfg, delivery("ORDER", "", map[string]string{"EVENT_ID": "77"}))
	requireUnidentifiable(t, o, err, s)
}

// The reason field is logged when the outcome has one, and left out when it has none.
func TestLogging_ReasonOnlyWhenThereIsOne(t *testing.T) {
	for name, tc := range map[string]struct {
		o    consumer.Outcome
		want any
	}{
		"with reason":    {consumer.Retry(0, "db down"), "db down"},
		"without reason": {consumer.Processed(), nil},
	} {
		t.Run(name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)

			_, _ = middleware.Logging(zap.New(core)).Wrap(returning(tc.o, nil)).Handle(context.Background(), delivery("ORDER", "", nil))

			require.Equal(t, 1, logs.Len())
			got, present := logs.All()[0].ContextMap()["reason"]
			assert.Equal(t, tc.want != nil, present)
			if tc.want != nil {
				assert.Equal(t, tc.want, got)
			}
		})
	}
}

// Timeout(0) adds no deadline of its own: the parent's (the consumer's HandlerTimeout) applies, and a
// handler that returns in time is not cut off.
func TestTimeout_ZeroKeepsOnlyTheParentDeadline(t *testing.T) {
	parentDeadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), parentDeadline)
	defer cancel()
	var got time.Time
	var ctxErr error
	h := middleware.Timeout(0).Wrap(consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		got, _ = ctx.Deadline()
		ctxErr = ctx.Err()
		return consumer.Processed(), nil
	}))

	o, err := h.Handle(ctx, delivery("ORDER", "", nil))

	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.NoError(t, ctxErr, "the handler's context was live")
	assert.True(t, got.Equal(parentDeadline), "deadline %v, want the parent's %v", got, parentDeadline)
}

// A panic whose value is an error keeps that error reachable with errors.Is; other values do not pretend to.
func TestRecover_PanicErrorUnwrapsToAnErrorValue(t *testing.T) {
	cause := errors.New("boom")
	_, err := middleware.Recover(zap.NewNop()).Wrap(consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		panic(cause)
	})).Handle(context.Background(), delivery("ORDER", "", nil))
	assert.ErrorIs(t, err, cause)
	assert.ErrorIs(t, err, middleware.ErrPanic)

	_, err = middleware.Recover(zap.NewNop()).Wrap(consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		panic("a string")
	})).Handle(context.Background(), delivery("ORDER", "", nil))
	var pe *middleware.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "a string", pe.Value)
	assert.Equal(t, "handler panicked: a string", err.Error())
	assert.True(t, strings.Contains(string(pe.Stack), "goroutine "), "a stack in runtime/debug format")
}
