package topics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/topics"
)

// Invalid settings fail before any request, each problem naming its field.
func TestTopics_ClusterValidateNamesTheField(t *testing.T) {
	err := topics.Cluster{NameServers: []string{" "}, Namespace: "a%b",
		Credentials: consumer.Credentials{AccessKey: "k"}}.Validate()
	require.Error(t, err)
	for _, field := range []string{"NameServers: entry 0 is empty", "Namespace:", "Credentials: give both"} {
		assert.Contains(t, err.Error(), field)
	}
	assert.NotContains(t, err.Error(), "secret key set")
	_, err = topics.Ensure(context.Background(), topics.Cluster{}, topics.Topic{Name: "T"})
	assert.ErrorContains(t, err, "NameServers: required")
}

func TestTopics_GroupTopicsAreRetryAndDLQWithOneQueue(t *testing.T) {
	assert.Equal(t, []topics.Topic{{Name: "%RETRY%g", Queues: 1}, {Name: "%DLQ%g", Queues: 1}}, topics.GroupTopics("g"))
	assert.Equal(t, "%DLQ%ns%g: updated", topics.Result{Topic: "%DLQ%ns%g", State: "updated"}.String())
	assert.Equal(t, "broker-b (10.0.0.2:10911): created", topics.BrokerResult{Broker: "broker-b", Addr: "10.0.0.2:10911", State: "created"}.String())
}

// route returns topic's route from the shared name server, waiting until it is visible.
func route(t *testing.T, ctx context.Context, ns, topic string) []rmq.QueueData {
	t.Helper()
	for {
		r, err := rmq.TopicRoute(ctx, []string{ns}, topic)
		if err == nil && len(r) > 0 {
			return r
		}
		if !errors.Is(err, rmq.ErrTopicNotExist) && err != nil || ctx.Err() != nil {
			t.Fatalf("route of %s: %v (ctx %v)", topic, err, ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// On the real broker: a new group's topics are created (perm 6, one queue), a second run finds them, a
// write-only DLQ is made readable with its queue counts kept, and an existing business topic keeps its
// queue count whatever Queues says.
func TestTopics_CreatedExistsUpdatedOnTheBroker(t *testing.T) {
	ns, broker := testenv.NameServer(t), testenv.Broker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cluster := topics.Cluster{NameServers: []string{ns}} // no Brokers: every master the name server lists
	group := testenv.Unique("rmqguard-topics")
	cleanup(t, ns, broker, "%RETRY%"+group, "%DLQ%"+group)

	res, err := topics.Ensure(ctx, cluster, topics.GroupTopics(group)...)
	require.NoError(t, err)
	for i, topic := range []string{"%RETRY%" + group, "%DLQ%" + group} {
		r := route(t, ctx, ns, topic)
		require.Len(t, r, 1)
		assert.Equal(t, rmq.QueueData{BrokerName: r[0].BrokerName, BrokerAddr: r[0].BrokerAddr, ReadQueues: 1, WriteQueues: 1, Perm: 6}, r[0], topic)
		assert.Equal(t, topics.Result{Topic: topic, State: "created",
			Brokers: []topics.BrokerResult{{Broker: r[0].BrokerName, Addr: broker, State: "created"}}}, res[i])
	}
	res, err = topics.Ensure(ctx, cluster, topics.GroupTopics(group)...)
	require.NoError(t, err)
	assert.Equal(t, []string{"exists", "exists"}, []string{res[0].State, res[1].State}, "idempotent")

	// A DLQ as brokers before 4.9.2 create it: write-only (perm 2), here with 2 read / 3 write queues.
	old := testenv.Unique("rmqguard-topics-old")
	cleanup(t, ns, broker, "%DLQ%"+old)
	require.NoError(t, rmq.UpdateTopic(ctx, broker, rmq.TopicConfig{Topic: "%DLQ%" + old, ReadQueues: 2, WriteQueues: 3, Perm: rmq.PermWrite}, rmq.Credentials{}))
	require.Equal(t, 2, route(t, ctx, ns, "%DLQ%"+old)[0].Perm)
	res, err = topics.Ensure(ctx, cluster, topics.Topic{Name: "%DLQ%" + old, Queues: 1})
	require.NoError(t, err)
	assert.Equal(t, "updated", res[0].State)
	r := route(t, ctx, ns, "%DLQ%"+old)[0]
	assert.Equal(t, []int{6, 2, 3}, []int{r.Perm, r.ReadQueues, r.WriteQueues}, "readable, queue counts kept")
	res, err = topics.Ensure(ctx, cluster, topics.Topic{Name: "%DLQ%" + old})
	require.NoError(t, err)
	assert.Equal(t, "exists", res[0].State)

	// A business topic: created with the default 4 queues on the broker given, then kept at that count.
	biz := "RMQGUARD_TOPICS_" + strings.ReplaceAll(testenv.Unique("t"), "-", "_")
	cleanup(t, ns, broker, biz)
	one := topics.Cluster{NameServers: []string{ns}, Brokers: []string{broker}}
	res, err = topics.Ensure(ctx, one, topics.Topic{Name: biz})
	require.NoError(t, err)
	assert.Equal(t, "created", res[0].State)
	res, err = topics.Ensure(ctx, one, topics.Topic{Name: biz, Queues: 8})
	require.NoError(t, err)
	assert.Equal(t, "exists", res[0].State)
	r = route(t, ctx, ns, biz)[0]
	assert.Equal(t, []int{6, 4, 4}, []int{r.Perm, r.ReadQueues, r.WriteQueues})
}

// A broker that does not answer fails Ensure with an error naming the topic and the broker.
func TestTopics_UnreachableBrokerIsNamed(t *testing.T) {
	ns := testenv.NameServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := topics.Ensure(ctx, topics.Cluster{NameServers: []string{ns}, Brokers: []string{"127.0.0.1:1"}}, topics.Topic{Name: "RMQGUARD_NEVER"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"RMQGUARD_NEVER"`)
	assert.Contains(t, err.Error(), "127.0.0.1:1")
}

// cleanup deletes the test's topics when it ends.
func cleanup(t *testing.T, ns, broker string, names ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, n := range names {
			if err := rmq.DeleteTopic(ctx, []string{ns}, broker, n); err != nil {
				t.Logf("delete %s: %v", n, err)
			}
		}
	})
}
