package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/middleware"
)

// Logging is a debug-only trace of each run: whatever the chain decided, its line is at
// debug (the consumer logs the final decision at the level that matters), with the run's fields and
// never the body.
func TestLogging_IsOneDebugLinePerRun(t *testing.T) {
	for _, tc := range []struct {
		o   consumer.Outcome
		err error
	}{
		{consumer.Processed(), nil},
		{consumer.Duplicate(), nil},
		{consumer.Retry(0, "db down"), errors.New("db down")},
		{consumer.DeadLetter("poison"), errors.New("poison")},
		{consumer.Outcome{}, nil},
	} {
		t.Run(fmt.Sprint(tc.o.Kind, " ", tc.o.Reason), func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			d := delivery("ORDER", `{"card":"4111-1111"}`, map[string]string{"KEYS": "o-1"})
			d.EventID = "e-1"

			o, err := middleware.Logging(zap.New(core)).Wrap(returning(tc.o, tc.err)).Handle(context.Background(), d)

			assert.Equal(t, tc.o, o)
			assert.Equal(t, tc.err, err)
			require.Equal(t, 1, logs.Len())
			entry := logs.All()[0]
			assert.Equal(t, zapcore.DebugLevel, entry.Level, "a run is a trace; the decision is the consumer's line")
			assert.Equal(t, "handler run", entry.Message)
			fields := entry.ContextMap()
			assert.Equal(t, "cg", fields["group"])
			assert.Equal(t, "ORDER", fields["topic"])
			assert.Equal(t, "e-1", fields["event_id"])
			assert.Equal(t, "o-1", fields["keys"])
			assert.Equal(t, tc.o.Kind.String(), fields["outcome"])
			for k, v := range fields {
				assert.NotContains(t, k, "body")
				if s, ok := v.(string); ok {
					assert.NotContains(t, s, "4111", "the body is never logged")
				}
			}
			if tc.err != nil {
				assert.Equal(t, tc.err.Error(), fields["error"])
			}
		})
	}
}

// At info (a production level) Logging writes nothing, even for failures: a retry or a
// dead letter is logged once, by the consumer, at its final decision.
func TestLogging_WritesNothingAboveDebug(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := middleware.Logging(zap.New(core))
	ran := 0
	for _, tc := range []struct {
		o   consumer.Outcome
		err error
	}{
		{consumer.Processed(), nil},
		{consumer.Retry(0, "db down"), errors.New("db down")},
		{consumer.DeadLetter("poison"), errors.New("poison")},
	} {
		o, err := h.Wrap(consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
			ran++
			return tc.o, tc.err
		})).Handle(context.Background(), delivery("ORDER", "", nil))
		assert.Equal(t, tc.o, o, "the outcome passes through")
		assert.Equal(t, tc.err, err)
	}
	assert.Equal(t, 3, ran)
	assert.Zero(t, logs.Len())
}

// The run is timed from its start, not from the zero time.
func TestLogging_DurationIsTheRunsWallTime(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	h := middleware.Logging(zap.New(core)).Wrap(consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		time.Sleep(5 * time.Millisecond)
		return consumer.Retry(0, "db down"), errors.New("db down")
	}))

	_, _ = h.Handle(context.Background(), delivery("ORDER", "", nil))

	require.Equal(t, 1, logs.Len())
	duration, ok := logs.All()[0].ContextMap()["duration"].(time.Duration)
	require.True(t, ok, "duration field: %v", logs.All()[0].ContextMap())
	assert.GreaterOrEqual(t, duration, 5*time.Millisecond)
	assert.Less(t, duration, time.Hour, "timed from the run's start, not from the zero time")
}
