package consumer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/internal/letter"
)

// statusProducer is a producer whose SendSync answers with a fixed status (or error) and records the
// letters it was given.
type statusProducer struct {
	mu     sync.Mutex
	status primitive.SendStatus
	err    error
	sent   []*primitive.Message
}

func (p *statusProducer) SendSync(_ context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent = append(p.sent, msgs...)
	if p.err != nil {
		return nil, p.err
	}
	return &primitive.SendResult{Status: p.status}, nil
}

// F6 with the real dlq.Publisher: the original is acknowledged only when the broker stored the letter
// (SEND_OK). A flush or slave timeout means the broker may not hold it durably: the message is not
// acknowledged, and the broker's own dead-lettering (delay level -1) takes it instead.
func TestConsume_F6_PublisherStatusOtherThanSendOKIsNotAcknowledged(t *testing.T) {
	for name, tc := range map[string]struct {
		status    primitive.SendStatus
		err       error
		wantRes   rmq.ConsumeResult
		wantDelay int
	}{
		"SEND_OK":                 {status: primitive.SendOK, wantRes: rmq.ConsumeSuccess},
		"FLUSH_SLAVE_TIMEOUT":     {status: primitive.SendFlushSlaveTimeout, wantRes: rmq.ConsumeRetryLater, wantDelay: consumer.DelayLevelDLQ},
		"FLUSH_DISK_TIMEOUT":      {status: primitive.SendFlushDiskTimeout, wantRes: rmq.ConsumeRetryLater, wantDelay: consumer.DelayLevelDLQ},
		"SLAVE_NOT_AVAILABLE":     {status: primitive.SendSlaveNotAvailable, wantRes: rmq.ConsumeRetryLater, wantDelay: consumer.DelayLevelDLQ},
		"UNKNOWN_ERROR":           {status: primitive.SendUnknownError, wantRes: rmq.ConsumeRetryLater, wantDelay: consumer.DelayLevelDLQ},
		"send error, no response": {err: errors.New("broker unreachable"), wantRes: rmq.ConsumeRetryLater, wantDelay: consumer.DelayLevelDLQ},
	} {
		t.Run(name, func(t *testing.T) {
			prod := &statusProducer{status: tc.status, err: tc.err}
			pub, err := dlq.NewPublisher(prod)
			require.NoError(t, err)
			_, fp := newConsumer(t, validConfig(), handlerReturning(consumer.DeadLetter("invalid payload"), errors.New("invalid payload")),
				consumer.WithDeadLetterSink(pub))

			res, delay := fp.deliver(t, "ORDER", orderMsg("o-1"))

			assert.Equal(t, tc.wantRes, res)
			assert.Equal(t, tc.wantDelay, delay)
			require.Len(t, prod.sent, 1, "one publish attempt")
			assert.Equal(t, "%DLQ%cg", prod.sent[0].Topic)
			assert.Equal(t, "invalid payload", prod.sent[0].GetProperty(letter.PropReason))
		})
	}
}

// In a batch, a letter whose publish came back FLUSH_SLAVE_TIMEOUT keeps the whole batch unacknowledged.
func TestConsume_F6_FlushSlaveTimeoutInABatchRetriesTheBatch(t *testing.T) {
	prod := &statusProducer{status: primitive.SendFlushSlaveTimeout}
	pub, err := dlq.NewPublisher(prod)
	require.NoError(t, err)
	r := &recorder{decide: func(d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetKeys() == "b-3" {
			return consumer.DeadLetter("poison"), nil
		}
		return consumer.Processed(), nil
	}}
	cfg := validConfig()
	cfg.BatchSize, cfg.OutageWait = 4, 300*time.Millisecond // a failed publish in a batch is retried within OutageWait
	_, fp := newConsumer(t, cfg, consumer.HandlerFunc(r.handle), consumer.WithDeadLetterSink(pub))

	res, delay := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3", "b-4")...)

	assert.Equal(t, rmq.ConsumeRetryLater, res)
	assert.NotEqual(t, consumer.DelayLevelDLQ, delay, "the neighbours must not follow the letter to the DLQ")
	require.NotEmpty(t, prod.sent)
	for _, l := range prod.sent {
		assert.Equal(t, "b-3", l.GetKeys())
	}
}

// nilResultSender answers a send with neither a result nor an error.
