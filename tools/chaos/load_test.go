package chaos_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/tools/chaos"
)

// flakyProducer fails its first failures sends (an error, then a status other than SEND_OK) and records
// the EVENT_IDs it accepted.
type flakyProducer struct {
	mu       sync.Mutex
	failures int
	calls    int
	accepted []string
}

func (p *flakyProducer) SendSync(_ context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	switch {
	case p.calls <= p.failures && p.calls%2 == 1:
		return nil, errors.New("broker away")
	case p.calls <= p.failures:
		return &primitive.SendResult{Status: primitive.SendFlushSlaveTimeout}, nil
	}
	p.accepted = append(p.accepted, msgs[0].GetProperty("EVENT_ID"))
	return &primitive.SendResult{Status: primitive.SendOK}, nil
}

func TestLoad_RetriesUntilSendOKInOrder(t *testing.T) {
	var msgs []*primitive.Message
	for _, id := range []string{"e0", "e1", "e2"} {
		m := primitive.NewMessage("T", []byte("{}"))
		m.WithProperty("EVENT_ID", id)
		msgs = append(msgs, m)
	}
	p := &flakyProducer{failures: 4}
	load := &chaos.Load{Rate: 1000, RetryEvery: 1}
	require.NoError(t, load.Send(context.Background(), p, msgs))
	assert.Equal(t, []string{"e0", "e1", "e2"}, p.accepted, "every message, in order, once SEND_OK")
	assert.Equal(t, 3, load.Sent())
	assert.Equal(t, 4, load.Retries(), "two errors and two non-OK statuses were retried")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := (&chaos.Load{Rate: 1000}).Send(ctx, &flakyProducer{}, msgs)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, (&chaos.Load{}).Send(context.Background(), p, msgs), "Rate 0: must be > 0")
}
