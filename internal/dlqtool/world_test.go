package dlqtool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	deadletter "github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/topics"
)

// dlqWorld is a consumer group of its own on the shared broker with a %DLQ% topic the test creates.
type dlqWorld struct {
	t       *testing.T
	ctx     context.Context
	ns      []string
	broker  string
	group   string
	cluster topics.Cluster
	prod    rocketmq.Producer
}

// newDLQWorld makes a unique group; perm 0 leaves %DLQ%<group> uncreated, else it is created with that perm
// and queues read and write queues (and deleted at the end).
func newDLQWorld(t *testing.T, perm, queues int) *dlqWorld {
	t.Helper()
	ns, broker := testenv.NameServer(t), testenv.Broker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	w := &dlqWorld{t: t, ctx: ctx, ns: []string{ns}, broker: broker, group: testenv.Unique("dlqread")}
	w.cluster = topics.Cluster{NameServers: w.ns}
	if perm != 0 {
		w.createDLQ(perm, queues)
	}
	return w
}

// createDLQ creates %DLQ%<group> with the admin client (perm and queue counts as given) and waits for its route.
func (w *dlqWorld) createDLQ(perm, queues int) {
	topic := rmq.DLQTopic(w.group)
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(w.ns)))
	require.NoError(w.t, err)
	w.t.Cleanup(func() {
		_ = adm.DeleteTopic(context.Background(), admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(w.broker),
			admin.WithNameSrvAddr(w.ns))
		_ = adm.Close()
	})
	require.NoError(w.t, adm.CreateTopic(w.ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(w.broker),
		admin.WithReadQueueNums(queues), admin.WithWriteQueueNums(queues), admin.WithPerm(perm)))
	require.Eventually(w.t, func() bool {
		r, err := rmq.TopicRoute(w.ctx, w.ns, topic)
		return err == nil && len(r) == 1 && r[0].Perm == perm
	}, 10*time.Second, 100*time.Millisecond, "route of %s with perm %d", topic, perm)
}

// deleteDLQ deletes %DLQ%<group> on the broker and the name server and waits until it has no route.
func (w *dlqWorld) deleteDLQ() {
	w.t.Helper()
	topic := rmq.DLQTopic(w.group)
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(w.ns)))
	require.NoError(w.t, err)
	defer func() { _ = adm.Close() }()
	require.NoError(w.t, adm.DeleteTopic(w.ctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(w.broker),
		admin.WithNameSrvAddr(w.ns)))
	require.Eventually(w.t, func() bool {
		_, err := rmq.TopicRoute(w.ctx, w.ns, topic)
		return errors.Is(err, rmq.ErrTopicNotExist)
	}, 10*time.Second, 100*time.Millisecond, "%s deleted", topic)
}

// letter describes one dead letter to publish.
type letter struct {
	eventID, eventType, keys, reason string
	at                               time.Time
	body                             []byte
	props                            map[string]string
}

// publish sends l to %DLQ%<group> as rmqguard's publisher does (the letter of a retried delivery
// from ORDER) and returns the send result.
func (w *dlqWorld) publish(l letter) *primitive.SendResult {
	w.t.Helper()
	if w.prod == nil {
		p, err := rmq.StartProducer(w.ns, testenv.Unique("dlqread-prod"))
		require.NoError(w.t, err)
		w.t.Cleanup(func() { _ = p.Shutdown() })
		w.prod = p
	}
	if l.body == nil {
		l.body = []byte("body of " + l.eventID) // the broker refuses an empty body
	}
	orig := &primitive.MessageExt{MsgId: testenv.Unique("MSG"), ReconsumeTimes: 3,
		Message: primitive.Message{Topic: rmq.RetryTopic(w.group), Body: l.body}}
	if l.keys != "" {
		orig.WithKeys([]string{l.keys})
	}
	orig.WithTag(l.eventType)
	if l.eventID != "" {
		orig.WithProperty("EVENT_ID", l.eventID)
	}
	for k, v := range l.props {
		orig.WithProperty(k, v)
	}
	orig.WithProperty(primitive.PropertyRetryTopic, "ORDER")
	if l.at.IsZero() {
		l.at = time.Now()
	}
	msg := deadletter.Message(deadletter.Origin{Msg: orig, Group: w.group, Topic: "ORDER"}, l.reason, l.at)
	res, err := w.prod.SendSync(w.ctx, msg)
	require.NoError(w.t, err)
	require.Equal(w.t, primitive.SendOK, res.Status)
	return res
}

// scan runs dlqtool.Scan on the world's group.
func (w *dlqWorld) scan(opts dlqtool.ScanOptions) dlqtool.ScanResult {
	w.t.Helper()
	res, err := dlqtool.Scan(w.ctx, w.cluster, w.group, opts)
	require.NoError(w.t, err)
	return res
}
