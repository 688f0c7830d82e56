package consumer_test

import (
	"context"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/letter"
)

// b3Poison processes every message but b-3, which is a permanent dead letter.
func b3Poison(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
	if d.Msg.GetKeys() == "b-3" {
		return consumer.DeadLetter("poison"), nil
	}
	return consumer.Processed(), nil
}

func withProducer(p *fakeProducer) consumer.Option {
	return consumer.WithDeadLetterProducer(func() (consumer.Producer, error) { return p, nil })
}

// By default the consumer's own producer publishes a dead letter, alone or in a batch, with its reason: the
// message is acknowledged (a batch whose others were processed too); the producer is created on the first
// letter and shut down with the consumer.
func TestConsume_F21_DeadLetterIsPublishedByTheConsumerAloneOrInABatch(t *testing.T) {
	for name, msgs := range map[string][]*primitive.MessageExt{
		"alone": {orderMsg("b-3")}, "in a batch": batch("b-1", "b-2", "b-3", "b-4"),
	} {
		t.Run(name, func(t *testing.T) {
			p := &fakeProducer{status: primitive.SendOK}
			c, fp := newBatchConsumer(t, consumer.HandlerFunc(b3Poison), withProducer(p))

			res, delay := fp.deliver(t, "ORDER", msgs...)

			assert.Equal(t, rmq.ConsumeSuccess, res, "b-3 published, the others processed: acknowledged")
			assert.NotEqual(t, consumer.DelayLevelDLQ, delay)
			assert.Equal(t, []string{"b-3"}, p.keys(), "b-3 is the only letter")
			assert.Equal(t, "%DLQ%cg", p.sent[0].Topic)
			assert.Equal(t, "poison", p.sent[0].GetProperty(letter.PropReason))
			require.NoError(t, c.Shutdown(context.Background()))
			starts, shutdowns := p.counts()
			assert.Equal(t, 1, starts, "created lazily, once")
			assert.Equal(t, 1, shutdowns, "shut down with the consumer")
		})
	}
}

func TestConsume_F21_FailedPublishInABatchIsRetriedWithinTheBound(t *testing.T) {
	p := &fakeProducer{status: primitive.SendOK, fail: 2}
	_, fp := newBatchConsumer(t, consumer.HandlerFunc(b3Poison), withProducer(p))

	res, _ := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3", "b-4")...)

	assert.Equal(t, rmq.ConsumeSuccess, res, "published at the third try")
	assert.Equal(t, []string{"b-3"}, p.keys())
}

func TestConsume_F21_PublishNotStoredPastTheBoundRetriesTheBatchNeverDLQsIt(t *testing.T) {
	p := &fakeProducer{status: primitive.SendFlushSlaveTimeout}
	cfg := validConfig()
	cfg.BatchSize, cfg.HandlerTimeout, cfg.OutageWait = 4, time.Second, 300*time.Millisecond
	_, fp := newConsumer(t, cfg, consumer.HandlerFunc(b3Poison), withProducer(p))

	res, delay := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3", "b-4")...)

	assert.Equal(t, rmq.ConsumeRetryLater, res, "FLUSH_SLAVE_TIMEOUT is not stored: never acknowledged")
	assert.Zero(t, delay, "-1 would dead-letter the processed neighbours")
	assert.Greater(t, len(p.keys()), 1, "retried with backoff within OutageWait")
}

func TestConsume_F21_SingleDeadLetterWithNilSinkUsesTheBrokerDLQ(t *testing.T) {
	p := &fakeProducer{status: primitive.SendOK}
	c, fp := newConsumer(t, validConfig(), consumer.HandlerFunc(b3Poison), withProducer(p), consumer.WithDeadLetterSink(nil))

	res, delay := fp.deliver(t, "ORDER", orderMsg("b-3"))

	assert.Equal(t, rmq.ConsumeRetryLater, res)
	assert.Equal(t, consumer.DelayLevelDLQ, delay)
	require.NoError(t, c.Shutdown(context.Background()))
	starts, _ := p.counts()
	assert.Zero(t, starts, "the producer is never created when no batch needs it")
}

func TestConsume_F21_DeadLetterInARetriedBatchIsNotPublishedWithoutSink(t *testing.T) {
	p := &fakeProducer{status: primitive.SendOK}
	_, fp := newBatchConsumer(t, consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetKeys() == "b-4" {
			return consumer.Retry(0, "busy"), nil
		}
		return b3Poison(ctx, d)
	}), withProducer(p))

	res, delay := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3", "b-4")...)

	assert.Equal(t, rmq.ConsumeRetryLater, res)
	assert.Zero(t, delay)
	assert.Empty(t, p.keys(), "published when its batch is acknowledged, not on every redelivery")
}

func TestConsume_F26_RetriedMessageWithAnUnsubscribedTagIsAcknowledgedWithoutHandling(t *testing.T) {
	r := &recorder{decide: func(*consumer.Delivery) (consumer.Outcome, error) { return consumer.Processed(), nil }}
	obs := &fakeObserver{}
	cfg := validConfig()
	cfg.Subscriptions = []consumer.Subscription{{Topic: "ORDER", Expression: "OrderCreated"}}
	_, fp := newConsumer(t, cfg, consumer.HandlerFunc(r.handle), consumer.WithObserver(obs))
	retried := func(tag, topic string) *primitive.MessageExt {
		m := orderMsg(tag + "-" + topic)
		m.Topic = "%RETRY%cg"
		m.WithTag(tag)
		m.WithProperty(primitive.PropertyRetryTopic, topic)
		m.ReconsumeTimes = 1
		return m
	}

	paid, _ := fp.deliver(t, "ORDER", retried("OrderPaid", "ORDER"))
	other, _ := fp.deliver(t, "ORDER", retried("OrderCreated", "PAYMENT"))
	created, _ := fp.deliver(t, "ORDER", retried("OrderCreated", "ORDER"))

	assert.Equal(t, rmq.ConsumeSuccess, paid, "acknowledged")
	assert.Equal(t, rmq.ConsumeSuccess, other, "a topic no longer subscribed is acknowledged too")
	assert.Equal(t, rmq.ConsumeSuccess, created)
	got := r.deliveries()
	require.Len(t, got, 1, "only the subscribed tag reached the handler")
	assert.Equal(t, "OrderCreated", got[0].Msg.GetTags())
	assert.Equal(t, []string{"cg/ORDER", "cg/PAYMENT"}, obs.unsubscribed)
}

func TestConsume_F26_TagListAndStarMatch(t *testing.T) {
	r := &recorder{decide: func(*consumer.Delivery) (consumer.Outcome, error) { return consumer.Processed(), nil }}
	cfg := validConfig()
	cfg.Subscriptions = []consumer.Subscription{{Topic: "ORDER", Expression: "OrderCreated || OrderPaid"}, {Topic: "PAYMENT"}}
	_, fp := newConsumer(t, cfg, consumer.HandlerFunc(r.handle))
	for _, tc := range []struct{ topic, tag string }{{"ORDER", "OrderCreated"}, {"ORDER", "OrderPaid"}, {"PAYMENT", "Anything"}, {"PAYMENT", ""}} {
		m := orderMsg(tc.topic + tc.tag)
		m.Topic = tc.topic
		if tc.tag != "" {
			m.WithTag(tc.tag)
		}
		res, _ := fp.deliver(t, tc.topic, m)
		assert.Equal(t, rmq.ConsumeSuccess, res)
	}
	assert.Len(t, r.deliveries(), 4, "every subscribed tag is handled")
}

// Every dead letter of an otherwise acknowledged batch is published, not only the first, before the batch
// is acknowledged.
func TestConsume_F21_EveryDeadLetterOfTheBatchIsPublished(t *testing.T) {
	p := &fakeProducer{status: primitive.SendOK}
	_, fp := newBatchConsumer(t, consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetKeys() == "b-1" {
			return consumer.DeadLetter("poison"), nil
		}
		return b3Poison(ctx, d)
	}), withProducer(p))

	res, delay := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3", "b-4")...)

	assert.Equal(t, rmq.ConsumeSuccess, res)
	assert.Zero(t, delay)
	assert.Equal(t, []string{"b-1", "b-3"}, p.keys())
}

// keyedProducer fails every send of a letter whose KEYS is in failing, and records the others.
type keyedProducer struct {
	fakeProducer
	failing map[string]bool
}

func (p *keyedProducer) SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error) {
	if p.failing[msgs[0].GetKeys()] {
		return nil, errDLQSend
	}
	return p.fakeProducer.SendSync(ctx, msgs...)
}

// Once one letter of a batch could not be published within OutageWait the batch is retried, so the letters
// after it are not published: they would be published again on the redelivery.
func TestConsume_F21_LettersAfterAFailedPublishAreNotPublished(t *testing.T) {
	p := &keyedProducer{fakeProducer: fakeProducer{status: primitive.SendOK}, failing: map[string]bool{"b-1": true}}
	cfg := validConfig()
	cfg.BatchSize, cfg.HandlerTimeout, cfg.OutageWait = 4, time.Second, 150*time.Millisecond
	_, fp := newConsumer(t, cfg, consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetKeys() == "b-1" {
			return consumer.DeadLetter("poison"), nil
		}
		return b3Poison(ctx, d)
	}), consumer.WithDeadLetterProducer(func() (consumer.Producer, error) { return p, nil }))

	res, delay := fp.deliver(t, "ORDER", batch("b-1", "b-2", "b-3", "b-4")...)

	assert.Equal(t, rmq.ConsumeRetryLater, res)
	assert.Zero(t, delay, "-1 would dead-letter the processed neighbours")
	assert.Empty(t, p.keys(), "b-3 waits for the batch's redelivery")
}
