package acl_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// seen is what the handler saw of one delivery.
type seen struct {
	body, topic, group string
	attempt            int
}

// send publishes one message with body (also its EVENT_ID) to the world's topic, signed with the right keys.
func (w *aclWorld) send(t *testing.T, bodies ...string) {
	t.Helper()
	p, err := rmq.StartProducer(w.cluster.NameServers, w.group+"-producer", w.access(w.cluster.Credentials)...)
	require.NoError(t, err)
	defer func() { _ = p.Shutdown() }()
	for _, b := range bodies {
		msg := primitive.NewMessage(rmq.InNamespace(w.cluster.Namespace, w.topic), []byte(b))
		msg.WithProperty("EVENT_ID", b)
		res, err := p.SendSync(w.ctx, msg)
		require.NoError(t, err)
		require.Equal(t, primitive.SendOK, res.Status)
	}
}

// newConsumer builds a consumer of the world's group in its namespace with credentials cred, from the
// first offset; every delivery goes to got, and h decides it. It is shut down when the test ends.
func (w *aclWorld) newConsumer(t *testing.T, cred consumer.Credentials, got chan<- seen,
	h func(d *consumer.Delivery) consumer.Outcome, opts ...consumer.Option) *consumer.Consumer {
	t.Helper()
	c, err := consumer.New(consumer.Config{
		NameServers: w.cluster.NameServers, Group: w.group, Namespace: w.cluster.Namespace, Credentials: cred,
		Subscriptions: []consumer.Subscription{{Topic: w.topic}}, StartFromFirstOffset: true, MaxAttempts: 3,
	}, consumer.HandlerFunc(func(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		got <- seen{body: string(d.Msg.Body), topic: d.Topic, group: d.Group, attempt: d.Attempt}
		return h(d), nil
	}), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	return c
}

// With the right keys in a namespace: a consumer consumes, a retry comes back through %RETRY%<ns>%<group>
// with the topic restored, and a dead letter published by dlq.Publisher (its producer built from
// dlqtool.ProducerOptions) lands on %DLQ%<ns>%<group>, where dlqtool.Read and `rmqguard dlq list`
// find it, and `rmqguard dlq replay` sends it back to the group once. Delivery shows the group and topic
// without the namespace.
func TestACL_RightKeysConsumeRetryDeadLetterAndReplayInANamespace(t *testing.T) {
	w := newACLWorld(t)
	w.send(t, "ok-1", "poison-1")

	p, err := rocketmq.NewProducer(append(dlqtool.ProducerOptions(w.cluster, w.group+"-dlq"),
		producer.WithInstanceName(testenv.Unique("acl-dlq")))...)
	require.NoError(t, err)
	require.NoError(t, p.Start())
	t.Cleanup(func() { _ = p.Shutdown() })
	pub, err := dlq.NewPublisher(p)
	require.NoError(t, err)

	got := make(chan seen, 16)
	var fixed atomic.Bool // the "bug" switch: once fixed, poison-1 is processed
	c := w.newConsumer(t, w.cluster.Credentials, got, func(d *consumer.Delivery) consumer.Outcome {
		switch {
		case string(d.Msg.Body) == "ok-1" || fixed.Load():
			return consumer.Processed()
		case d.Attempt == 0:
			return consumer.Retry(0, "first try fails")
		default:
			return consumer.DeadLetter("poison after a retry")
		}
	}, consumer.WithDeadLetterSink(pub))
	require.NoError(t, c.Start())

	var deliveries []seen
	deadline := time.After(60 * time.Second)
	for len(deliveries) < 3 {
		select {
		case s := <-got:
			deliveries = append(deliveries, s)
		case <-deadline:
			t.Fatalf("60 s: want 3 deliveries (ok-1, poison-1 twice), got %+v", deliveries)
		}
	}
	for _, s := range deliveries {
		assert.Equal(t, w.topic, s.topic, "Delivery.Topic is the topic without the namespace")
		assert.Equal(t, w.group, s.group, "Delivery.Group is the group without the namespace")
	}
	assert.ElementsMatch(t, []seen{
		{body: "ok-1", topic: w.topic, group: w.group},
		{body: "poison-1", topic: w.topic, group: w.group},
		{body: "poison-1", topic: w.topic, group: w.group, attempt: 1},
	}, deliveries, "the retry came back through %%RETRY%%<ns>%%<group>")

	var letters []*primitive.MessageExt
	require.Eventually(t, func() bool {
		letters, err = dlqtool.Read(w.ctx, w.cluster, w.group, 10)
		return err == nil && len(letters) == 1
	}, 30*time.Second, 500*time.Millisecond, "one letter on %s (last error %v)", rmq.NamespacedDLQTopic(w.cluster.Namespace, w.group), err)
	l := letters[0]
	assert.Equal(t, "%DLQ%"+w.cluster.Namespace+"%"+w.group, l.Topic)
	assert.Equal(t, "poison-1", string(l.Body))
	assert.Equal(t, "poison after a retry", l.GetProperty(letter.PropReason))
	assert.Equal(t, rmq.InNamespace(w.cluster.Namespace, w.topic), l.GetProperty(primitive.PropertyRetryTopic),
		"origin in the namespace, as the broker writes it")

	// The operator's view: `rmqguard dlq list` with the keys and namespace from the environment lists it;
	// with a wrong secret it fails with the ACL error.
	bin := buildCLI(t)
	env := []string{"RMQGUARD_NAMESRV=" + w.cluster.NameServers[0], "RMQGUARD_ACCESS_KEY=" + w.cluster.Credentials.AccessKey,
		"RMQGUARD_SECRET_KEY=" + w.cluster.Credentials.SecretKey, "RMQGUARD_NAMESPACE=" + w.cluster.Namespace,
		"RMQGUARD_MYSQL_DSN=" + testenv.MySQLDSN()} // the test database, migrated here, never the demo one
	testenv.MySQL(t)
	res := runCLI(t, bin, env, "dlq", "list", "--group", w.group, "--timeout", "30s")
	require.Equal(t, 0, res.exit, "stderr: %s", res.stderr)
	assert.Contains(t, res.stdout, "poison after a retry")
	res = runCLI(t, bin, env, "dlq", "list", "--group", w.group, "--timeout", "30s", "--secret-key", "not-the-secret")
	assert.Equal(t, 1, res.exit)
	assert.Contains(t, res.stderr, "ACL: access denied / signature mismatch for access key "+w.cluster.Credentials.AccessKey)
	assert.NotContains(t, res.stdout, "poison after a retry")
	assert.NotContains(t, res.stdout+res.stderr, "not-the-secret")

	// `rmqguard dlq replay` with the same keys and namespace: the letter goes to %RETRY%<ns>%<group> and the
	// group gets it back with the topic restored; a second run sends nothing; a wrong secret is refused.
	fixed.Store(true)
	dsn := testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN)
	replay := []string{"dlq", "replay", "--group", w.group, "--mysql-dsn", dsn, "--yes", "--operator", "acl-test", "--timeout", "30s"}
	res = runCLI(t, bin, env, append(replay, "--secret-key", "not-the-secret")...)
	assert.Equal(t, 1, res.exit)
	assert.Contains(t, res.stderr, "ACL: access denied / signature mismatch for access key "+w.cluster.Credentials.AccessKey)
	res = runCLI(t, bin, env, replay...)
	require.Equal(t, 0, res.exit, "stdout: %s\nstderr: %s", res.stdout, res.stderr)
	assert.Contains(t, res.stdout, "sent 1")
	select {
	case s := <-got:
		assert.Equal(t, seen{body: "poison-1", topic: w.topic, group: w.group}, s, "the replay, in the namespace, topic restored")
	case <-time.After(30 * time.Second):
		t.Fatal("30 s: the replayed letter did not come back to the group")
	}
	res = runCLI(t, bin, env, replay...)
	require.Equal(t, 0, res.exit, "stderr: %s", res.stderr)
	assert.Contains(t, res.stdout, "sent 0")
	assert.Contains(t, res.stdout, "already replayed 1")
}

// With a wrong secret the broker refuses, and says so with an error naming the access key that callers
// match with errors.Is: consumer.Start fails with an error matching consumer.ErrACL (the client itself would
// only log its refused pulls and heartbeats and receive nothing) that wraps rmq's *rmq.ACLError.
func TestACL_WrongSecretIsRefusedWithAClearError(t *testing.T) {
	w := newACLWorld(t)
	w.send(t, "never-consumed")
	wrong := w.wrongSecret()

	got := make(chan seen, 4)
	c := w.newConsumer(t, wrong, got, func(*consumer.Delivery) consumer.Outcome { return consumer.Processed() })
	err := c.Start()
	require.ErrorIs(t, err, consumer.ErrACL, "from Start")
	var acl *rmq.ACLError
	require.True(t, errors.As(err, &acl), "want *rmq.ACLError inside Start's error, got %v", err)
	assert.Equal(t, wrong.AccessKey, acl.AccessKey)
	assert.Equal(t, w.stack.Broker, acl.Broker)
	assert.Contains(t, err.Error(), "ACL: access denied / signature mismatch for access key "+wrong.AccessKey)
	assert.NotContains(t, err.Error(), wrong.SecretKey)

	err = rmq.CheckClusterAccess(w.ctx, w.cluster.NameServers, rmq.Credentials(wrong))
	require.True(t, errors.As(err, &acl), "rmq, wrong secret: %v", err)
	err = rmq.CheckClusterAccess(w.ctx, w.cluster.NameServers, rmq.Credentials{AccessKey: "nobody", SecretKey: "x"})
	require.True(t, errors.As(err, &acl), "rmq, unknown user: %v", err)
	assert.Equal(t, "nobody", acl.AccessKey)
	err = rmq.CheckClusterAccess(w.ctx, w.cluster.NameServers, rmq.Credentials{})
	require.True(t, errors.As(err, &acl), "rmq, no credentials: %v", err)
	require.NoError(t, rmq.CheckClusterAccess(w.ctx, w.cluster.NameServers, rmq.Credentials(w.cluster.Credentials)))
	select {
	case s := <-got:
		t.Fatalf("a consumer refused at Start received %+v", s)
	default:
	}
}
