package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
)

// payment is the body type of the typed handler tests.
type payment struct {
	PaymentID   string `json:"paymentId"`
	AmountCents int64  `json:"amountCents"`
}

// typedDelivery is a first delivery of body with event ID "e-1" already extracted.
func typedDelivery(body string) *consumer.Delivery {
	d := testenv.NewDelivery("cg", &primitive.MessageExt{MsgId: "m-1", Message: primitive.Message{Topic: "PAY", Body: []byte(body)}})
	d.EventID = "e-1"
	return d
}

// paymentRecorder is a typed handler function (HandleJSON's fn) that keeps what it was called with.
type paymentRecorder struct {
	calls int
	got   payment
	event string
}

func (r *paymentRecorder) handle(_ context.Context, d *consumer.Delivery, p payment) (consumer.Outcome, error) {
	r.calls++
	r.got, r.event = p, d.EventID
	return consumer.Processed(), nil
}

func TestHandleJSON_DecodesIntoTheStructAcceptingUnknownFieldsAndABOM(t *testing.T) {
	for name, body := range map[string]string{
		"plain":         `{"paymentId":"p-1","amountCents":1250}`,
		"unknown field": `{"paymentId":"p-1","amountCents":1250,"currency":"EUR","meta":{"v":2}}`,
		"BOM":           "\xEF\xBB\xBF" + `{"paymentId":"p-1","amountCents":1250}`,
	} {
		t.Run(name, func(t *testing.T) {
			var r paymentRecorder
			o, err := consumer.HandleJSON(r.handle).Handle(context.Background(), typedDelivery(body))
			require.NoError(t, err)
			assert.Equal(t, consumer.KindProcessed, o.Kind)
			assert.Equal(t, 1, r.calls)
			assert.Equal(t, payment{PaymentID: "p-1", AmountCents: 1250}, r.got)
			assert.Equal(t, "e-1", r.event, "the event ID is the delivery's")
		})
	}
}

// An undecodable body is a dead letter with the codec's error as its reason, on every delivery, through
// Classify too; the handler never runs.
func TestHandleJSON_UndecodableBodyIsDeadLetteredAtOnce(t *testing.T) {
	for name, body := range map[string]string{
		"empty":          ``,
		"not json":       `not json`,
		"wrong type":     `{"paymentId":"p-1","amountCents":"12.50"}`,
		"trailing data":  `{"paymentId":"p-1"} {"paymentId":"p-2"}`,
		"truncated":      `{"paymentId":"p-1","amountCents":`,
		"array not obj.": `[1,2]`,
		"null":           `null`,
		"null, spaces":   " null\n",
		"null after BOM": "\xEF\xBB\xBFnull",
	} {
		t.Run(name, func(t *testing.T) {
			var r paymentRecorder
			h := testenv.Must(middleware.Chain(consumer.HandleJSON(r.handle), middleware.Classify()))
			for attempt := range 2 {
				d := typedDelivery(body)
				d.Attempt, d.MaxAttempts = attempt, 1 // the second is the last delivery
				o, err := h.Handle(context.Background(), d)
				require.Error(t, err)
				assert.Equal(t, consumer.KindDeadLetter, o.Kind, "%s", o)
				assert.Equal(t, causelabel.Permanent, o.Cause)
				assert.True(t, strings.HasPrefix(o.Reason, "undecodable body: "), "%q", o.Reason)
				assert.NotContains(t, o.Reason, "retries exhausted", "dead-lettered for the body, not for its attempts")
				assert.ErrorIs(t, err, consumer.ErrUndecodableBody)
				assert.Equal(t, retry.ClassPermanent, retry.Classify(err))
				assert.Equal(t, consumer.DelayLevelDLQ, consumer.Resolve(o, err, consumer.Concurrent).DelayLevel)
			}
			assert.Zero(t, r.calls)
		})
	}
}

var errNotAPayment = errors.New("not a payment")

// codecFunc adapts a function to a consumer.Codec.
type codecFunc func(body []byte, v any) error

func (f codecFunc) Decode(body []byte, v any) error { return f(body, v) }

func TestDecodeAs_UsesTheCodecAndWrapsItsError(t *testing.T) {
	codec := codecFunc(func(body []byte, v any) error {
		p, ok := v.(*payment)
		if !ok || !strings.HasPrefix(string(body), "PAY ") {
			return errNotAPayment
		}
		p.PaymentID = strings.TrimPrefix(string(body), "PAY ")
		return nil
	})

	p, o, err := consumer.DecodeAs[payment](codec, typedDelivery("PAY p-9"))
	require.NoError(t, err)
	assert.Equal(t, consumer.Outcome{}, o)
	assert.Equal(t, payment{PaymentID: "p-9"}, p, "the codec got a *T")

	_, o, err = consumer.DecodeAs[payment](codec, typedDelivery(`{"paymentId":"p-1"}`))
	assert.ErrorIs(t, err, errNotAPayment)
	assert.ErrorIs(t, err, consumer.ErrUndecodableBody)
	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Equal(t, "undecodable body: not a payment", o.Reason)
}

func TestHandleJSON_NilHandlerFailsAtConstruction(t *testing.T) {
	assert.PanicsWithValue(t, "consumer.HandleJSON: the handler function is nil", func() {
		consumer.HandleJSON[payment](nil)
	})
}

// The JSON codec leaves the body as it was (it keeps no reference and writes nothing).
func TestJSON_DoesNotChangeTheBody(t *testing.T) {
	body := []byte("\xEF\xBB\xBF" + `{"paymentId":"p-1"}`)
	keep := string(body)
	var p payment
	require.NoError(t, consumer.JSON{}.Decode(body, &p))
	assert.Equal(t, keep, string(body))
	assert.Equal(t, payment{PaymentID: "p-1"}, p)
}

// With a pointer type T, a codec that decodes "null" to a nil *T without error (encoding/json's Unmarshal;
// consumer.JSON refuses null itself) would hand the handler a nil pointer to dereference (a panic, a retry
// through Recover, on every delivery). It is an undecodable body instead: a dead letter at once, and the
// handler never runs.
func TestHandleJSON_NullBodyForAPointerTypeIsDeadLetteredNotANilPointer(t *testing.T) {
	for _, body := range []string{`null`, " null \n"} {
		p, o, err := consumer.DecodeAs[*payment](codecFunc(json.Unmarshal), typedDelivery(body))
		require.Error(t, err, "%q", body)
		assert.Nil(t, p)
		assert.ErrorIs(t, err, consumer.ErrUndecodableBody)
		assert.Equal(t, consumer.KindDeadLetter, o.Kind)
		assert.Equal(t, "undecodable body: the body decodes to a nil *consumer_test.payment", o.Reason)
	}

	var got *payment
	o, err := consumer.HandleJSON(func(_ context.Context, _ *consumer.Delivery, p *payment) (consumer.Outcome, error) {
		got = p
		return consumer.Processed(), nil
	}).Handle(context.Background(), typedDelivery(`{"paymentId":"p-1"}`))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	require.NotNil(t, got)
	assert.Equal(t, "p-1", got.PaymentID)
}
