package acl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/topics"
)

// With keys and a namespace: consumer.WithEnsureTopics(topics.ForConsumer) creates a fresh group's
// %RETRY%<ns>%<group> and %DLQ%<ns>%<group> in Start (signed), a dlq.StartPublisher built from the same
// settings dead-letters a message there and is closed by Shutdown; with a wrong secret Start fails with
// the *consumer.ACLError naming the broker, and creates nothing.
func TestACL_EnsureTopicsAndPublisherFromSettingsInANamespace(t *testing.T) {
	w := newACLWorld(t)
	w.group += "-fresh" // newACLWorld made the topics of w.group; this group has none
	ns := w.cluster.NameServers
	groupTopics := []string{w.cluster.RetryTopic(w.group), w.cluster.DLQTopic(w.group)}
	for _, tp := range groupTopics {
		_, err := rmq.TopicRoute(w.ctx, ns, tp)
		require.ErrorIs(t, err, rmq.ErrTopicNotExist, tp)
	}
	w.send(t, "poison-1")

	pub, err := dlq.StartPublisher(dlq.PublisherConfig{NameServers: ns, Group: w.group,
		Namespace: w.cluster.Namespace, Credentials: w.cluster.Credentials})
	require.NoError(t, err)
	got := make(chan seen, 8)
	c := w.newConsumer(t, w.cluster.Credentials, got, func(*consumer.Delivery) consumer.Outcome {
		return consumer.DeadLetter("poison in a namespace")
	}, consumer.WithEnsureTopics(topics.ForConsumer), consumer.WithDeadLetterSink(pub))
	require.NoError(t, c.Start())
	for _, tp := range groupTopics {
		r, err := rmq.TopicRoute(w.ctx, ns, tp)
		require.NoError(t, err, "Start created %s", tp)
		require.Len(t, r, 1)
		assert.Equal(t, []int{6, 1, 1}, []int{r[0].Perm, r[0].ReadQueues, r[0].WriteQueues}, tp)
	}

	var letters []*primitive.MessageExt
	require.Eventually(t, func() bool {
		letters, err = dlq.ReadCluster(w.ctx, w.cluster, w.group, 10)
		return err == nil && len(letters) == 1
	}, 60*time.Second, 500*time.Millisecond, "one letter on %s (last error %v)", groupTopics[1], err)
	assert.Equal(t, groupTopics[1], letters[0].Topic)
	assert.Equal(t, "poison-1", string(letters[0].Body))
	assert.Equal(t, "poison in a namespace", letters[0].GetProperty(consumer.PropDeadLetterReason))
	require.NoError(t, c.Shutdown(context.Background()))
	err = pub.DeadLetter(w.ctx, consumer.NewDelivery(w.group, letters[0]), "after shutdown")
	assert.ErrorIs(t, err, dlq.ErrPublisherClosed)

	w.group += "-wrong"
	wrong := w.wrongSecret()
	c2 := w.newConsumer(t, wrong, got, func(*consumer.Delivery) consumer.Outcome { return consumer.Processed() },
		consumer.WithEnsureTopics(topics.ForConsumer))
	err = c2.Start()
	var acl *consumer.ACLError
	require.True(t, errors.As(err, &acl), "want *consumer.ACLError from Start, got %v", err)
	assert.Equal(t, w.stack.Broker, acl.Broker)
	assert.Contains(t, err.Error(), "ensure topics")
	assert.Contains(t, err.Error(), w.cluster.RetryTopic(w.group))
	assert.NotContains(t, err.Error(), wrong.SecretKey)
	_, err = rmq.TopicRoute(w.ctx, ns, w.cluster.RetryTopic(w.group))
	assert.ErrorIs(t, err, rmq.ErrTopicNotExist, "nothing created with refused keys")
}
