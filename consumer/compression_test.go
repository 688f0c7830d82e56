package consumer_test

import (
	"context"
	"strconv"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/body"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

var plainOrder = []byte(`{"eventId":"e-1","orderNo":"O-1","note":"zwölf Bücher, 十二本"}`)

// storedMsg is orderMsg("c-1") with the body b the client left as stored, with sysFlag.
func storedMsg(b []byte, sysFlag int32) *primitive.MessageExt {
	return testenv.StoredBody(orderMsg("c-1"), b, sysFlag)
}

func TestCompression_TheChainSeesTheDecodedBodyAndNoCompressedFlag(t *testing.T) {
	var seen []byte
	var flag int32
	h := func(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		seen, flag = d.Msg.Body, d.Msg.SysFlag
		return consumer.Processed(), nil
	}
	_, fp := newConsumer(t, validConfig(), consumer.HandlerFunc(h))
	res, _ := fp.deliver(t, "ORDER", storedMsg(testenv.JavaCompressed(t, body.SysFlagZSTD, plainOrder), body.SysFlagCompressed|body.SysFlagZSTD))
	assert.Equal(t, rmq.ConsumeSuccess, res)
	assert.Equal(t, plainOrder, seen)
	assert.Equal(t, body.SysFlagZSTD, flag, "the compressed flag is cleared, the codec bits stay (as the Java client does)")
}

func TestCompression_AnUnsupportedCodecIsDeadLetteredAtOnceWithTheFlagKept(t *testing.T) {
	called := false
	h := func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		called = true
		return consumer.Processed(), nil
	}
	// Alone, without a sink: the broker's own DLQ (DelayLevelDLQ) keeps body and SysFlag as stored.
	_, fp := newConsumer(t, validConfig(), consumer.HandlerFunc(h))
	flag := body.SysFlagCompressed | 4<<8
	res, delay := fp.deliver(t, "ORDER", storedMsg([]byte("opaque"), flag))
	assert.Equal(t, rmq.ConsumeRetryLater, res)
	assert.Equal(t, consumer.DelayLevelDLQ, delay, "dead-lettered at once, never retried")
	assert.False(t, called, "the chain never sees a body it cannot read")

	// Published by the consumer (a batch): the letter keeps the stored body and names the flag.
	p := &fakeProducer{status: primitive.SendOK}
	c, fpb := newBatchConsumer(t, consumer.HandlerFunc(h), withProducer(p))
	m := storedMsg([]byte("opaque"), flag)
	m.WithKeys([]string{"b-2"})
	res, _ = fpb.deliver(t, "ORDER", append(batch("b-1"), m)...)
	assert.Equal(t, rmq.ConsumeSuccess, res)
	require.Len(t, p.sent, 1)
	assert.Equal(t, []byte("opaque"), p.sent[0].Body)
	assert.Equal(t, strconv.Itoa(int(flag)), p.sent[0].GetProperty(body.PropSysFlag))
	assert.Contains(t, p.sent[0].GetProperty(letter.PropReason), "unsupported compression (type 4")
	require.NoError(t, c.Shutdown(context.Background()))
}

func TestCompression_ALetterOfADecodedBodyIsPlainAndCarriesNoBodySysFlag(t *testing.T) {
	p := &fakeProducer{status: primitive.SendOK}
	c, fp := newBatchConsumer(t, consumer.HandlerFunc(b3Poison), withProducer(p))
	m := storedMsg(testenv.JavaCompressed(t, body.SysFlagLZ4, plainOrder), body.SysFlagCompressed|body.SysFlagLZ4)
	m.WithKeys([]string{"b-3"})
	res, _ := fp.deliver(t, "ORDER", append(batch("b-1"), m)...)
	assert.Equal(t, rmq.ConsumeSuccess, res)
	require.Len(t, p.sent, 1)
	assert.Equal(t, plainOrder, p.sent[0].Body, "the handler's dead letter carries the body it saw")
	assert.Empty(t, p.sent[0].GetProperty(body.PropSysFlag))
	require.NoError(t, c.Shutdown(context.Background()))
}
