package e2e

import (
	"context"
	"sync"

	"github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/require"

	irmq "github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// wireObserver reads the world's topic with a plain rocketmq-client-go push consumer of a group of its own
// (no rmqguard in between), so a test sees each message as the broker stored it: its SysFlag (compressed flag
// and codec bits), its BodyCRC, and the body as the client hands it on (zlib inflated by the client, LZ4 and
// ZSTD as stored). It does not move the world's group's offsets. A message delivered twice (a rebalance)
// counts once.
type wireObserver struct {
	mu   sync.Mutex
	msgs map[string]map[string]*primitive.MessageExt // by EVENT_ID, then message ID
}

// observeWire starts the observer from the topic's first offset; it is shut down when the test ends.
func (w *world) observeWire() *wireObserver {
	w.t.Helper()
	group := w.group + "-wire"
	require.NoError(w.t, irmq.EnsureGroupTopics(w.ctx, w.ns, testenv.Broker(w.t), group))
	pc, err := rocketmq.NewPushConsumer(
		rmq.WithNsResolver(primitive.NewPassthroughResolver(w.ns)),
		rmq.WithGroupName(group),
		rmq.WithInstance(group),
		rmq.WithConsumeFromWhere(rmq.ConsumeFromFirstOffset))
	require.NoError(w.t, err)
	o := &wireObserver{msgs: map[string]map[string]*primitive.MessageExt{}}
	require.NoError(w.t, pc.Subscribe(w.topic, rmq.MessageSelector{},
		func(_ context.Context, msgs ...*primitive.MessageExt) (rmq.ConsumeResult, error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			for _, m := range msgs {
				id := m.GetProperty("EVENT_ID")
				if o.msgs[id] == nil {
					o.msgs[id] = map[string]*primitive.MessageExt{}
				}
				o.msgs[id][m.MsgId] = m
			}
			return rmq.ConsumeSuccess, nil
		}))
	require.NoError(w.t, pc.Start())
	w.t.Cleanup(func() { _ = pc.Shutdown() })
	return o
}

// count is the number of messages observed.
func (o *wireObserver) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, ms := range o.msgs {
		n += len(ms)
	}
	return n
}

// of returns the messages observed with EVENT_ID eventID.
func (o *wireObserver) of(eventID string) []*primitive.MessageExt {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*primitive.MessageExt
	for _, m := range o.msgs[eventID] {
		out = append(out, m)
	}
	return out
}
