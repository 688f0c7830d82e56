package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/topics"
)

// world is one test's own topic, consumer group and producer on the real broker, so tests never see each
// other's messages, offsets or dead letters.
type world struct {
	t     *testing.T
	ctx   context.Context
	ns    []string
	run   string // unique prefix of this test's event IDs and order numbers
	topic string
	group string
	prod  rocketmq.Producer
}

// newWorld creates a topic with queues queues and the group's retry and DLQ topics (so that the first
// retries are not delayed by the client's 30 s route refresh), and starts a producer. Everything is
// released when the test ends; the test's context ends after 4 minutes.
func newWorld(t *testing.T, queues int) *world {
	t.Helper()
	ns := []string{testenv.NameServer(t)}
	broker := testenv.Broker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	// The client logs from goroutines that outlive the test, so its rlog output stays on its own writer.
	rlog.SetLogLevel("error")

	run := testenv.Unique("e2e")
	w := &world{t: t, ctx: ctx, ns: ns, run: run,
		topic: "RMQGUARD_E2E_" + strings.ReplaceAll(run, "-", "_"), group: "rmqguard-e2e-" + run}
	require.NoError(t, rmq.EnsureTopic(ctx, ns, broker, w.topic, queues))
	require.NoError(t, rmq.EnsureGroupTopics(ctx, ns, broker, w.group))
	prod, err := rmq.StartProducer(ns, w.group+"-producer")
	require.NoError(t, err)
	t.Cleanup(func() { _ = prod.Shutdown() })
	w.prod = prod
	return w
}

// send sends msgs in order and requires SEND_OK for each.
func (w *world) send(msgs ...*primitive.Message) {
	w.t.Helper()
	for _, msg := range msgs {
		res, err := w.prod.SendSync(w.ctx, msg)
		require.NoError(w.t, err)
		require.Equal(w.t, primitive.SendOK, res.Status)
	}
}

// start starts a consumer of the world's group on its topic, reading from the first offset; cfg supplies
// the other settings. It is shut down when the test ends, if the test has not done it (Shutdown is
// idempotent).
func (w *world) start(cfg consumer.Config, h consumer.Handler, opts ...consumer.Option) *consumer.Consumer {
	w.t.Helper()
	cfg.NameServers, cfg.Group = w.ns, w.group
	cfg.Subscriptions = []consumer.Subscription{{Topic: w.topic}}
	cfg.StartFromFirstOffset = true
	c, err := consumer.New(cfg, h, opts...)
	require.NoError(w.t, err)
	require.NoError(w.t, c.Start())
	w.t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	return c
}

// httpGet returns the status code of a GET.
func httpGet(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// requireNoDeadLetters reads %DLQ%<group> itself (not a metric) and fails the test if it holds a letter.
// dlqtool.Read stops at the max offsets it captured first, so an empty DLQ costs no broker long-poll.
func (w *world) requireNoDeadLetters() {
	w.t.Helper()
	letters, err := dlqtool.Read(w.ctx, topics.Cluster{NameServers: w.ns}, w.group, 10)
	require.NoError(w.t, err)
	var keys []string
	for _, l := range letters {
		keys = append(keys, l.GetProperty("EVENT_ID")+" ("+l.GetProperty(letter.PropReason)+")")
	}
	require.Empty(w.t, keys, "%%DLQ%%%s holds letters", w.group)
}
