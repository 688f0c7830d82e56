package letter_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/body"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// answering is a producer's SendSync that answers res.
func answering(res *primitive.SendResult) letter.SendFunc {
	return func(context.Context, ...*primitive.Message) (*primitive.SendResult, error) { return res, nil }
}

func origin() letter.Origin {
	m := &primitive.MessageExt{Message: primitive.Message{Topic: "ORDER"}, MsgId: "msg-o-1"}
	return letter.Origin{Msg: m, Group: "cg", Topic: "ORDER"}
}

// F6: a send that returns no result is not a stored letter; the error says so rather than the call panicking.
func TestSend_NoResultIsNotStored(t *testing.T) {
	err := letter.Send(context.Background(), answering(nil), origin(), "poison", time.Now())

	require.ErrorIs(t, err, letter.ErrNotStored)
	assert.Contains(t, err.Error(), "no result")
}

// F6: the error of a letter the broker did not store names the status it answered, for the operator.
func TestSend_NotStoredNamesTheStatus(t *testing.T) {
	res := &primitive.SendResult{Status: primitive.SendFlushSlaveTimeout}
	err := letter.Send(context.Background(), answering(res), origin(), "poison", time.Now())

	require.ErrorIs(t, err, letter.ErrNotStored)
	assert.Contains(t, err.Error(), "status "+strconv.Itoa(int(primitive.SendFlushSlaveTimeout)))
}

// A letter whose body is still compressed as the broker stored it carries the codec in PropSysFlag (the
// producer cannot set the letter's SysFlag); a plain body's letter carries none.
func TestMessage_StillCompressedBodyCarriesItsCodecAndAPlainOneDoesNot(t *testing.T) {
	flag := body.SysFlagCompressed | body.SysFlagLZ4
	o := origin()
	o.Msg = testenv.StoredBody(o.Msg, testenv.JavaCompressed(t, body.SysFlagLZ4, []byte(`{"eventId":"e-1"}`)), flag)
	l := letter.Message(o, "poison", time.Now())
	assert.Equal(t, strconv.Itoa(int(flag)), l.GetProperty(body.PropSysFlag))
	assert.Equal(t, "poison", l.GetProperty(letter.PropReason))

	p := origin()
	p.Msg = testenv.StoredBody(p.Msg, []byte(`{"eventId":"e-1"}`), 0)
	assert.Empty(t, letter.Message(p, "poison", time.Now()).GetProperty(body.PropSysFlag))
}

// A dead letter keeps the original's W3C trace context (traceparent, tracestate), so that its replay
// continues the producer's trace.
func TestMessage_KeepsTheTraceContext(t *testing.T) {
	o := origin()
	o.Msg.WithProperty("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	o.Msg.WithProperty("tracestate", "vendor=abc")

	l := letter.Message(o, "poison", time.Now())

	assert.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", l.GetProperty("traceparent"))
	assert.Equal(t, "vendor=abc", l.GetProperty("tracestate"))
}
