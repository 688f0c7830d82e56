package dlq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dlq"
)

// Invalid settings fail StartPublisher before any client is built, each naming its field.
func TestStartPublisher_InvalidSettingsNameTheField(t *testing.T) {
	_, err := dlq.StartPublisher(dlq.PublisherConfig{NameServers: []string{"nohost"}, Namespace: "a b",
		Credentials: consumer.Credentials{SecretKey: "s3cret"}, SendRetries: 17})
	require.Error(t, err)
	var ce *dlq.PublisherConfigError
	require.ErrorAs(t, err, &ce)
	for _, want := range []string{"NameServers: entry 0 \"nohost\" is not host:port", "Group: required",
		"Namespace:", "Credentials: give both", "SendRetries: 17 is outside -1..16"} {
		assert.Contains(t, err.Error(), "dlq publisher config: "+want)
	}
	assert.NotContains(t, err.Error(), "s3cret")
	_, err = dlq.StartPublisher(dlq.PublisherConfig{Group: "g"})
	assert.ErrorContains(t, err, "NameServers: required")
}

// A Publisher from NewPublisher does not own its producer: Close only refuses later letters.
func TestPublisher_CloseRefusesLettersAndLeavesACallersProducer(t *testing.T) {
	prod := &fakeProducer{res: &primitive.SendResult{Status: primitive.SendOK}}
	p, err := dlq.NewPublisher(prod)
	require.NoError(t, err)
	require.NoError(t, p.DeadLetter(context.Background(), retriedDelivery(), "bad"))
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "twice is safe")
	err = p.DeadLetter(context.Background(), retriedDelivery(), "bad")
	assert.True(t, errors.Is(err, dlq.ErrPublisherClosed), "got %v", err)
	assert.Len(t, prod.sent, 1)
}
