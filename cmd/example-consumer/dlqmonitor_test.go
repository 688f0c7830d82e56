package main

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/topics"
)

// F42 in the example consumer: run's DLQ census exports rmqguard_dlq_letters_waiting{group}: a letter on the
// group's DLQ whose event was never processed counts as waiting; stopping the census ends its goroutine.
func TestExampleConsumer_ExportsTheDLQLettersWaiting(t *testing.T) {
	ns, broker := testenv.NameServer(t), testenv.Broker(t)
	db := shoptest.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	group := testenv.Unique("example-dlq")
	dlqTopic := rmq.DLQTopic(group)
	t.Cleanup(func() { _ = rmq.DeleteTopic(context.Background(), []string{ns}, broker, dlqTopic) })
	require.NoError(t, rmq.EnsureTopic(ctx, []string{ns}, broker, dlqTopic, 1))
	p, err := rmq.StartProducer([]string{ns}, group+"-producer")
	require.NoError(t, err)
	defer func() { _ = p.Shutdown() }()
	letter := primitive.NewMessage(dlqTopic, []byte(`{"eventId":"`+group+`-e"}`))
	letter.WithProperty(primitive.PropertyRetryTopic, "ORDER")
	res, err := p.SendSync(ctx, letter)
	require.NoError(t, err)
	require.Equal(t, primitive.SendOK, res.Status)

	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	stop, err := startDLQMonitor(ctx, db, topics.Cluster{NameServers: []string{ns}}, group, m, 100*time.Millisecond, zap.NewNop())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return testutil.CollectAndCount(m.DLQLettersWaiting) == 1 && testutil.ToFloat64(m.DLQLettersWaiting.WithLabelValues(group)) == 1
	}, 30*time.Second, 50*time.Millisecond, "one letter waiting")
	stop()

	noCensus, err := startDLQMonitor(ctx, db, topics.Cluster{NameServers: []string{ns}}, group+"-off", m, 0, zap.NewNop())
	require.NoError(t, err)
	noCensus()
	assert.Equal(t, 1, testutil.CollectAndCount(m.DLQLettersWaiting), "--dlq-interval 0 counts nothing")
}
