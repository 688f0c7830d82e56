package middleware_test

import (
	"context"
	"errors"
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

func TestLogging_OneLinePerMessageAtTheOutcomesLevel(t *testing.T) {
	for _, tc := range []struct {
		o     consumer.Outcome
		err   error
		level zapcore.Level
	}{
		{consumer.Processed(), nil, zapcore.InfoLevel},
		{consumer.Duplicate(), nil, zapcore.InfoLevel},
		{consumer.Retry(0, "db down"), errors.New("db down"), zapcore.WarnLevel},
		{consumer.DeadLetter("poison"), errors.New("poison"), zapcore.ErrorLevel},
		{consumer.Outcome{}, nil, zapcore.ErrorLevel},
	} {
		t.Run(tc.o.String(), func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			d := delivery("ORDER", `{"card":"4111-1111"}`, map[string]string{"KEYS": "o-1"})
			d.EventID = "e-1"

			o, err := middleware.Logging(zap.New(core))(returning(tc.o, tc.err))(context.Background(), d)

			assert.Equal(t, tc.o, o)
			assert.Equal(t, tc.err, err)
			require.Equal(t, 1, logs.Len())
			entry := logs.All()[0]
			assert.Equal(t, tc.level, entry.Level)
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

func TestLogging_DurationIsMeasuredWhenOnlyWarningsAreLogged(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	slowRetry := func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		time.Sleep(5 * time.Millisecond)
		return consumer.Retry(0, "db down"), errors.New("db down")
	}
	h := middleware.Logging(zap.New(core))

	_, _ = h(returning(consumer.Processed(), nil))(context.Background(), delivery("ORDER", "", nil))
	_, _ = h(slowRetry)(context.Background(), delivery("ORDER", "", nil))

	require.Equal(t, 1, logs.Len(), "the success is below the logger's level; the retry is logged")
	duration, ok := logs.All()[0].ContextMap()["duration"].(time.Duration)
	require.True(t, ok, "duration field: %v", logs.All()[0].ContextMap())
	assert.GreaterOrEqual(t, duration, 5*time.Millisecond, "the run is timed from its start, not from zero")
	assert.Less(t, duration, time.Hour)
}

// A core may enable one level without the ones above it (here info alone): the line it writes still
// carries the run's real duration.
func TestLogging_DurationIsMeasuredForACoreThatEnablesInfoAlone(t *testing.T) {
	core, logs := observer.New(zap.LevelEnablerFunc(func(l zapcore.Level) bool { return l == zapcore.InfoLevel }))
	h := middleware.Logging(zap.New(core))(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		time.Sleep(5 * time.Millisecond)
		return consumer.Processed(), nil
	})

	_, _ = h(context.Background(), delivery("ORDER", "", nil))

	require.Equal(t, 1, logs.Len())
	duration, _ := logs.All()[0].ContextMap()["duration"].(time.Duration)
	assert.GreaterOrEqual(t, duration, 5*time.Millisecond)
	assert.Less(t, duration, time.Hour, "timed from the run's start, not from the zero time")
}
