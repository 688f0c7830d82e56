package consumer_test

import (
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

func TestNewDelivery_F4_RetryTopicRestored(t *testing.T) {
	m := &primitive.MessageExt{Message: primitive.Message{Topic: "%RETRY%cg"}, ReconsumeTimes: 3}
	m.WithProperty(primitive.PropertyRetryTopic, "ORDER")

	d := testenv.NewDelivery("cg", m)

	assert.Equal(t, "ORDER", d.Topic)
	assert.Equal(t, 3, d.Attempt, "Attempt is ReconsumeTimes")
	assert.Equal(t, "cg", d.Group)
	assert.Same(t, m, d.Msg)
	assert.Equal(t, "%RETRY%cg", m.Topic, "the message itself is not modified")
}

func TestNewDelivery_F4_NormalMessageKeepsItsTopic(t *testing.T) {
	m := &primitive.MessageExt{Message: primitive.Message{Topic: "ORDER"}}
	m.WithProperty(primitive.PropertyRetryTopic, "OTHER") // only honoured on %RETRY%/%DLQ% topics

	d := testenv.NewDelivery("cg", m)

	assert.Equal(t, "ORDER", d.Topic)
	assert.Equal(t, 0, d.Attempt)
}

func TestNewDelivery_F4_RetryTopicWithoutPropertyIsKept(t *testing.T) {
	m := &primitive.MessageExt{Message: primitive.Message{Topic: "%RETRY%cg"}}
	assert.Equal(t, "%RETRY%cg", testenv.NewDelivery("cg", m).Topic)
}

func TestNewDelivery_F18_DLQTopicRestored(t *testing.T) {
	m := &primitive.MessageExt{Message: primitive.Message{Topic: "%DLQ%cg"}}
	m.WithProperty(primitive.PropertyRetryTopic, "ORDER")
	assert.Equal(t, "ORDER", testenv.NewDelivery("cg", m).Topic)
}

// F5: the last delivery is the one whose Attempt (ReconsumeTimes) has reached MaxAttempts; with
// MaxAttempts unknown (0) no delivery is the last.
func TestDelivery_F5_LastAttempt(t *testing.T) {
	for _, tc := range []struct {
		attempt, maxAttempts int
		last                 bool
	}{
		{0, 0, false}, {5, 0, false}, // unknown MaxAttempts
		{0, 1, false}, {1, 1, true},
		{2, 3, false}, {3, 3, true}, {4, 3, true},
	} {
		d := &consumer.Delivery{Attempt: tc.attempt, MaxAttempts: tc.maxAttempts}
		assert.Equal(t, tc.last, d.LastAttempt(), "Attempt %d of MaxAttempts %d", tc.attempt, tc.maxAttempts)
	}
}
