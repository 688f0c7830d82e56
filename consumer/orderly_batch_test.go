package consumer_test

import (
	"errors"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
)

// F3 with BatchSize > 1: v1, v2, v3 of one aggregate arrive in one orderly batch and v1 fails. v2 and v3
// must not be handled before v1 succeeds ("messages behind it wait"): handled now, they would take effect
// before v1. They are not handled, spend no attempt and are reported as retried; once v1 succeeds the
// three are handled in order.
func TestOrderly_F3_BatchMembersBehindAFailureWait(t *testing.T) {
	cfg := orderlyConfig()
	cfg.BatchSize = 3
	failV1 := true
	r := &recorder{decide: func(d *consumer.Delivery) (consumer.Outcome, error) {
		if d.Msg.GetKeys() == "v-1" && failV1 {
			return consumer.Outcome{}, errors.New("db down")
		}
		return consumer.Processed(), nil
	}}
	obs := &fakeObserver{}
	_, fp := newOrderlyConsumer(t, cfg, consumer.HandlerFunc(r.handle), consumer.WithObserver(obs))
	msgs := batch("v-1", "v-2", "v-3")

	a := deliverOrderly(fp, "ORDER", 2, msgs...)

	require.Equal(t, rmq.SuspendCurrentQueueAMoment, a.res)
	var handled []string
	for _, d := range r.deliveries() {
		handled = append(handled, d.Msg.GetKeys())
	}
	assert.Equal(t, []string{"v-1"}, handled, "v-2 and v-3 wait behind the failed v-1")
	assert.Equal(t, []int32{1, 0, 0}, []int32{msgs[0].ReconsumeTimes, msgs[1].ReconsumeTimes, msgs[2].ReconsumeTimes},
		"only v-1's own failure spends an attempt")
	for _, m := range msgs[1:] {
		decs := obs.decisions(m.MsgId)
		require.Len(t, decs, 1, m.GetKeys())
		assert.Equal(t, consumer.KindRetry, decs[0].Outcome.Kind, "%s is delivered again", m.GetKeys())
	}

	failV1 = false
	a = deliverOrderly(fp, "ORDER", 2, msgs...)
	assert.Equal(t, rmq.ConsumeSuccess, a.res)
	handled = nil
	for _, d := range r.deliveries() {
		handled = append(handled, d.Msg.GetKeys())
	}
	assert.Equal(t, []string{"v-1", "v-1", "v-2", "v-3"}, handled)
}

// A dead letter in an orderly batch is decided (its letter is published once the batch is acknowledged),
// so the members behind it are handled; and a member on its last delivery that still fails becomes a dead
// letter, which does not hold them back either.
func TestOrderly_F3_BatchMembersBehindADeadLetterAreHandled(t *testing.T) {
	cfg := orderlyConfig()
	cfg.BatchSize = 3
	sink := &fakeSink{}
	r := &recorder{decide: func(d *consumer.Delivery) (consumer.Outcome, error) {
		switch d.Msg.GetKeys() {
		case "v-1":
			return consumer.DeadLetter("unknown SKU"), nil
		case "v-2":
			return consumer.Outcome{}, errors.New("db down")
		}
		return consumer.Processed(), nil
	}}
	_, fp := newOrderlyConsumer(t, cfg, consumer.HandlerFunc(r.handle), consumer.WithDeadLetterSink(sink))
	msgs := batch("v-1", "v-2", "v-3")
	msgs[1].ReconsumeTimes = 2 // its last delivery

	a := deliverOrderly(fp, "ORDER", 2, msgs...)

	assert.Equal(t, rmq.ConsumeSuccess, a.res)
	assert.Len(t, r.deliveries(), 3, "every member handled")
	assert.Len(t, sink.reasons, 2, "v-1 and the exhausted v-2 published")
}
