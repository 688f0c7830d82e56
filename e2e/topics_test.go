package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/topics"
)

// A brand-new group whose %RETRY% and %DLQ% topics do not exist: a consumer with no options creates both
// (readable, one queue) in Start, and its own producer dead-letters a poison message with its reason.
func TestE2E_ConsumerEnsuresTopicsInStartAndPublishesDeadLettersByDefault(t *testing.T) {
	ns, broker := []string{testenv.NameServer(t)}, testenv.Broker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rlog.SetLogLevel("error")
	run := testenv.Unique("e2e-topics")
	topic, group := "RMQGUARD_E2E_"+strings.ReplaceAll(run, "-", "_"), "rmqguard-e2e-"+run
	retryTopic, dlqTopic := rmq.RetryTopic(group), rmq.DLQTopic(group)
	t.Cleanup(func() { deleteTopics(ns, broker, topic, retryTopic, dlqTopic) })
	res, err := topics.Ensure(ctx, topics.Cluster{NameServers: ns, Brokers: []string{broker}}, topics.Topic{Name: topic, Queues: 2})
	require.NoError(t, err)
	require.Equal(t, "created", res[0].State)
	for _, tp := range []string{retryTopic, dlqTopic} {
		_, err := rmq.TopicRoute(ctx, ns, tp)
		require.ErrorIs(t, err, rmq.ErrTopicNotExist, "a fresh group has no %s yet", tp)
	}

	handler := consumer.HandlerFunc(func(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		if string(d.Msg.Body) == "poison" {
			return consumer.DeadLetter("poison body: not an order"), nil
		}
		return consumer.Processed(), nil
	})
	c, err := consumer.New(consumer.Config{NameServers: ns, Group: group, MaxAttempts: 3,
		Subscriptions: []consumer.Subscription{{Topic: topic}}, StartFromFirstOffset: true},
		handler)
	require.NoError(t, err)
	require.NoError(t, c.Start())
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	for _, tp := range []string{retryTopic, dlqTopic} {
		r, err := rmq.TopicRoute(ctx, ns, tp)
		require.NoError(t, err, "Start created %s", tp)
		require.Len(t, r, 1)
		assert.Equal(t, []int{6, 1, 1}, []int{r[0].Perm, r[0].ReadQueues, r[0].WriteQueues}, tp)
	}

	prod, err := rmq.StartProducer(ns, group+"-producer")
	require.NoError(t, err)
	defer func() { _ = prod.Shutdown() }()
	poison := primitive.NewMessage(topic, []byte("poison"))
	poison.WithProperty("EVENT_ID", run+"-poison")
	sent, err := prod.SendSync(ctx, poison)
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, sent.Status)

	var letters []*primitive.MessageExt
	require.Eventually(t, func() bool {
		letters, err = dlqtool.Read(ctx, topics.Cluster{NameServers: ns}, group, 10)
		return err == nil && len(letters) > 0
	}, time.Minute, 500*time.Millisecond, "the poison message reaches %s", dlqTopic)
	require.Len(t, letters, 1)
	assert.Equal(t, run+"-poison", letters[0].GetProperty("EVENT_ID"))
	assert.Equal(t, "poison body: not an order", letters[0].GetProperty(letter.PropReason))
	assert.Equal(t, sent.MsgID, letters[0].GetProperty(letter.PropOriginMsgID))

	assert.Equal(t, dlqTopic, letters[0].Topic)
	require.NoError(t, c.Shutdown(ctx))
}

// deleteTopics removes a test's topics from the shared broker (best effort).
func deleteTopics(ns []string, broker string, names ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range names {
		_ = rmq.DeleteTopic(ctx, ns, broker, n)
	}
}
