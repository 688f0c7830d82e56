package dlq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dlq"
	deadletter "github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

func retriedDelivery() *consumer.Delivery {
	msg := &primitive.MessageExt{MsgId: "MSG-1", ReconsumeTimes: 2,
		Message: primitive.Message{Topic: "%RETRY%cg", Body: []byte("not json")}}
	msg.WithKeys([]string{"order-1"})
	msg.WithTag("OrderCreated")
	msg.WithProperty("EVENT_ID", "e-1")
	msg.WithProperty(primitive.PropertyRetryTopic, "ORDER")
	msg.WithProperty(primitive.PropertyUniqueClientMessageIdKeyIndex, "MSG-1")
	msg.WithProperty(primitive.PropertyRealTopic, "%RETRY%cg")
	msg.WithProperty(primitive.PropertyDelayTimeLevel, "3")
	msg.WithProperty(primitive.PropertyTimerDeliverMS, "1700000000000")
	return testenv.NewDelivery("cg", msg)
}

func TestLetter_F18_KeepsBusinessDataAndOriginTopicDropsSystemProperties(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	d := retriedDelivery()
	l := deadletter.Message(deadletter.Origin{Msg: d.Msg, Group: d.Group, Topic: d.Topic}, "invalid JSON", at)

	assert.Equal(t, "%DLQ%cg", l.Topic)
	assert.Equal(t, []byte("not json"), l.Body)
	assert.Equal(t, "order-1", l.GetKeys())
	assert.Equal(t, "OrderCreated", l.GetTags())
	assert.Equal(t, "e-1", l.GetProperty("EVENT_ID"))
	assert.Equal(t, "ORDER", l.GetProperty(primitive.PropertyRetryTopic), "the origin topic, never %RETRY%")
	assert.Equal(t, "invalid JSON", l.GetProperty(deadletter.PropReason))
	assert.Equal(t, "MSG-1", l.GetProperty(deadletter.PropOriginMsgID))
	assert.Equal(t, "2", l.GetProperty(deadletter.PropReconsumeTimes))
	assert.Equal(t, "cg", l.GetProperty(deadletter.PropGroup))
	assert.Equal(t, "2026-11-30T12:00:00Z", l.GetProperty(deadletter.PropAt))
	for _, p := range []string{primitive.PropertyUniqueClientMessageIdKeyIndex, primitive.PropertyRealTopic,
		primitive.PropertyDelayTimeLevel, primitive.PropertyTimerDeliverMS} {
		assert.Empty(t, l.GetProperty(p), "system property %s is not copied", p)
	}
}

type fakeProducer struct {
	res  *primitive.SendResult
	err  error
	sent []*primitive.Message
}

func (f *fakeProducer) SendSync(_ context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	f.sent = append(f.sent, msgs...)
	return f.res, f.err
}

func TestPublisher_F6_OnlySendOKCounts(t *testing.T) {
	for name, tc := range map[string]struct {
		res     *primitive.SendResult
		err     error
		wantErr error
	}{
		"send ok":          {res: &primitive.SendResult{Status: primitive.SendOK}},
		"flush disk fails": {res: &primitive.SendResult{Status: primitive.SendFlushDiskTimeout}, wantErr: deadletter.ErrNotStored},
		"no result":        {wantErr: deadletter.ErrNotStored},
		"send error":       {err: errors.New("broker unreachable")},
	} {
		t.Run(name, func(t *testing.T) {
			p := &fakeProducer{res: tc.res, err: tc.err}
			pub, err := dlq.NewPublisher(p)
			require.NoError(t, err)

			err = pub.DeadLetter(context.Background(), retriedDelivery(), "poison")

			require.Len(t, p.sent, 1)
			assert.Equal(t, "%DLQ%cg", p.sent[0].Topic)
			switch {
			case tc.err != nil:
				assert.ErrorIs(t, err, tc.err)
			case tc.wantErr != nil:
				assert.ErrorIs(t, err, tc.wantErr)
			default:
				assert.NoError(t, err)
			}
		})
	}
}

func TestNewPublisher_RejectsNilProducer(t *testing.T) {
	_, err := dlq.NewPublisher(nil)
	assert.Error(t, err)
}
