package pending

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// delivery, outcome and handler stand for consumer.Delivery, consumer.Outcome and consumer.Handler.
type (
	delivery struct{ id string }
	outcome  struct{ reason string }
	handler  = Handler[delivery, outcome]
	fn       func(context.Context, *delivery) (outcome, error)
)

func (f fn) Handle(ctx context.Context, d *delivery) (outcome, error) { return f(ctx, d) }

func deadLetter(reason string) outcome { return outcome{reason: reason} }

func TestInspect_RecognisesARefusalMadeElsewhereAndReturnsItsError(t *testing.T) {
	errX := errors.New("dedup.Handle: the handler function is nil")
	h := Refuse[delivery](errX, deadLetter)

	inner, err, wrapped := Inspect(h)

	require.ErrorIs(t, err, errX)
	assert.Nil(t, inner)
	assert.False(t, wrapped)
	assert.ErrorIs(t, Refused(h), errX)
}

func TestInspect_ReturnsTheHandlerAWrapRunsWithItsError(t *testing.T) {
	errX := errors.New("incomplete")
	runs := 0
	h := Wrap(fn(func(context.Context, *delivery) (outcome, error) { runs++; return outcome{}, nil }), errX)

	inner, err, wrapped := Inspect(h)

	require.ErrorIs(t, err, errX)
	require.True(t, wrapped)
	_, _ = inner.Handle(context.Background(), &delivery{})
	assert.Equal(t, 1, runs, "inner is the wrapped handler, and Inspect did not run it")
}

func TestInspect_NeverCallsAnotherHandler(t *testing.T) {
	calls := 0
	h := fn(func(context.Context, *delivery) (outcome, error) { calls++; return outcome{}, nil })

	inner, err, wrapped := Inspect(h)

	assert.NoError(t, err)
	assert.Nil(t, inner)
	assert.False(t, wrapped)
	assert.NoError(t, Refused(h))
	assert.NoError(t, Refused[delivery, outcome](nil))
	assert.Zero(t, calls)
}

// condition is a Wrap error that is a condition on the consumer, not a refusal.
type condition struct{}

func (condition) Error() string                { return "a condition" }
func (condition) CheckConcurrency(_ int) error { return nil }

func TestRefused_IsNilForAConditionButItsErrorForAnyOtherWrap(t *testing.T) {
	h := fn(func(context.Context, *delivery) (outcome, error) { return outcome{}, nil })

	assert.NoError(t, Refused(Wrap(h, condition{})))
	assert.Error(t, Refused(Wrap(h, errors.New("router: "+condition{}.Error()))))
	assert.Error(t, Refused(Wrap(h, nil)), "a nil error still refuses")
	assert.Error(t, Refused(Refuse[delivery](condition{}, deadLetter)), "a refusal is never a condition")
}

func TestRefuse_OnADeliveryIsItsDeadLetter(t *testing.T) {
	o, err := Refuse[delivery](errors.New("store is nil"), deadLetter).Handle(context.Background(), &delivery{id: "m1"})

	require.NoError(t, err)
	assert.Equal(t, "handler could not be built: store is nil", o.reason)
}
