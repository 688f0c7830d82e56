package consumer_test

import (
	"context"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/letter"
	irmq "github.com/rmqguard/rmqguard/internal/rmq"
)

func TestConfigValidate_ACL_NamespaceAndCredentials(t *testing.T) {
	for _, ns := range []string{"prod%x", "a|b", "sp ace", "ü", string(make([]byte, irmq.MaxNamespaceLength+1))} {
		cfg := validConfig()
		cfg.Namespace = ns
		assert.Equal(t, []string{"Namespace"}, fields(t, cfg.Validate()), "namespace %q", ns)
	}
	for _, c := range []consumer.Credentials{{AccessKey: "ak"}, {SecretKey: "sk-hidden"}} {
		cfg := validConfig()
		cfg.Credentials = c
		err := cfg.Validate()
		assert.Equal(t, []string{"Credentials"}, fields(t, err))
		assert.NotContains(t, err.Error(), "sk-hidden", "the secret is never shown")
	}
	cfg := validConfig()
	cfg.Namespace = "prod-1_a"
	cfg.Credentials = consumer.Credentials{AccessKey: "ak", SecretKey: "sk"}
	require.NoError(t, cfg.Validate())
}

func TestConsume_ACL_NamespacedDeliveryShowsNamesWithoutTheNamespace(t *testing.T) {
	cfg := validConfig()
	cfg.Namespace = "prod"
	topic := cfg.Subscriptions[0].Topic
	var got *consumer.Delivery
	_, fp := newConsumer(t, cfg, consumer.HandlerFunc(func(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		got = d
		return consumer.Processed(), nil
	}))
	m := &primitive.MessageExt{Message: primitive.Message{Topic: "%RETRY%prod%" + cfg.Group}, ReconsumeTimes: 1}
	m.WithProperty(primitive.PropertyRetryTopic, "prod%"+topic)
	res, _ := fp.deliver(t, topic, m) // the fake keys callbacks by the topic as subscribed

	assert.Equal(t, rmq.ConsumeSuccess, res)
	require.NotNil(t, got)
	assert.Equal(t, topic, got.Topic)
	assert.Equal(t, cfg.Group, got.Group)
	assert.Equal(t, "prod", got.Namespace)

	l := letter.Message(letter.Origin{Msg: got.Msg, Group: got.Group, Topic: got.Topic, Namespace: got.Namespace}, "why", time.Unix(0, 0))
	assert.Equal(t, "%DLQ%prod%"+cfg.Group, l.Topic, "the broker's DLQ name, not the client's ns%%DLQ%%G")
	assert.Equal(t, "prod%"+topic, l.GetProperty(primitive.PropertyRetryTopic), "origin as the broker writes it")
}
