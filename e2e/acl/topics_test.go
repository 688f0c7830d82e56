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
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// With keys and a namespace, by default: Start creates a fresh group's %RETRY%<ns>%<group> and
// %DLQ%<ns>%<group> (signed), and the consumer's own producer dead-letters a message there with its
// reason; with a wrong secret Start fails with an error matching consumer.ErrACL, naming the broker, and creates nothing.
func TestACL_ConsumerEnsuresTopicsAndPublishesDeadLettersInANamespace(t *testing.T) {
	w := newACLWorld(t)
	w.group += "-fresh" // newACLWorld made the topics of w.group; this group has none
	ns := w.cluster.NameServers
	groupTopics := []string{rmq.NamespacedRetryTopic(w.cluster.Namespace, w.group), rmq.NamespacedDLQTopic(w.cluster.Namespace, w.group)}
	for _, tp := range groupTopics {
		_, err := rmq.TopicRoute(w.ctx, ns, tp)
		require.ErrorIs(t, err, rmq.ErrTopicNotExist, tp)
	}
	w.send(t, "poison-1")

	got := make(chan seen, 8)
	c := w.newConsumer(t, w.cluster.Credentials, got, func(*consumer.Delivery) consumer.Outcome {
		return consumer.DeadLetter("poison in a namespace")
	})
	require.NoError(t, c.Start())
	for _, tp := range groupTopics {
		r, err := rmq.TopicRoute(w.ctx, ns, tp)
		require.NoError(t, err, "Start created %s", tp)
		require.Len(t, r, 1)
		assert.Equal(t, []int{6, 1, 1}, []int{r[0].Perm, r[0].ReadQueues, r[0].WriteQueues}, tp)
	}

	var letters []*primitive.MessageExt
	var err error
	require.Eventually(t, func() bool {
		letters, err = dlqtool.Read(w.ctx, w.cluster, w.group, 10)
		return err == nil && len(letters) == 1
	}, 60*time.Second, 500*time.Millisecond, "one letter on %s (last error %v)", groupTopics[1], err)
	assert.Equal(t, groupTopics[1], letters[0].Topic)
	assert.Equal(t, "poison-1", string(letters[0].Body))
	assert.Equal(t, "poison in a namespace", letters[0].GetProperty(letter.PropReason))
	require.NoError(t, c.Shutdown(context.Background()))

	w.group += "-wrong"
	wrong := w.wrongSecret()
	c2 := w.newConsumer(t, wrong, got, func(*consumer.Delivery) consumer.Outcome { return consumer.Processed() })
	err = c2.Start()
	require.ErrorIs(t, err, consumer.ErrACL, "from Start")
	var acl *rmq.ACLError
	require.True(t, errors.As(err, &acl), "want *rmq.ACLError inside Start's error, got %v", err)
	assert.Equal(t, w.stack.Broker, acl.Broker)
	assert.Contains(t, err.Error(), "ensure topics")
	assert.Contains(t, err.Error(), rmq.NamespacedRetryTopic(w.cluster.Namespace, w.group))
	assert.NotContains(t, err.Error(), wrong.SecretKey)
	_, err = rmq.TopicRoute(w.ctx, ns, rmq.NamespacedRetryTopic(w.cluster.Namespace, w.group))
	assert.ErrorIs(t, err, rmq.ErrTopicNotExist, "nothing created with refused keys")
}
