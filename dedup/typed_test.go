package dedup_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
)

// typedChain is the fixture's chain around dedup.HandleJSON with a handler that records its order in the
// ledger and counts its calls.
func (f *fixture) typedChain(t *testing.T, calls *atomic.Int32) consumer.Handler {
	t.Helper()
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	h := dedup.HandleJSON(func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery, e orderCreated) (consumer.Outcome, error) {
		calls.Add(1)
		if e.EventID != d.EventID || e.Quantity != 2 {
			return consumer.Outcome{}, retry.Permanentf("decoded %+v for event %s", e, d.EventID)
		}
		return consumer.Processed(), f.ledger.Append(ctx, tx, d.EventID)
	})
	return testenv.Must(middleware.Chain(h, testenv.Must(middleware.Metrics(f.metrics)), middleware.Recover(zap.NewNop()), middleware.Classify(),
		eventID, testenv.Must(middleware.Dedup(f.store))))
}

// rawMsg is a physical message carrying body and the EVENT_ID property, redelivered redeliveries times.
func (f *fixture) rawMsg(eventID, body string, redeliveries int32) *primitive.MessageExt {
	msg := &primitive.MessageExt{MsgId: testenv.Unique("msg"), ReconsumeTimes: redeliveries,
		Message: primitive.Message{Topic: "ORDER", Body: []byte(body)}}
	msg.WithProperty("EVENT_ID", eventID)
	return msg
}

// A body with a field the type does not know is decoded and processed once; its redelivery is a duplicate
// that is not decoded at all.
func TestHandleJSON_UnknownFieldIsAcceptedAndProcessedOnce(t *testing.T) {
	f := newFixture(t)
	var calls atomic.Int32
	h := f.typedChain(t, &calls)
	ev := f.prefix + "-e"
	body := `{"eventId":"` + ev + `","orderNo":"` + f.prefix + `-1","skuId":"s","quantity":2,"couponCode":"NEW-FIELD"}`

	o, err := f.handle(h, f.rawMsg(ev, body, 0))
	res := testenv.AnswerTo(t, o, err)
	require.NoError(t, err)
	require.Equal(t, consumer.KindProcessed, o.Kind, "%s", o)
	assert.Equal(t, testenv.AnswerTo(t, consumer.Processed(), nil), res)

	o, err = f.handle(h, f.rawMsg(ev, body, 1))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDuplicate, o.Kind, "%s", o)
	assert.Equal(t, int32(1), calls.Load(), "the duplicate is acknowledged before decoding")
	assert.Equal(t, 1, f.dedupRows(t, ev))
	assert.Equal(t, 1, f.ledger.Count(t, ev))
}

// A body the codec cannot read is dead-lettered at once (DelayLevelDLQ) with the reason, the handler never
// runs, the claim is rolled back (no processed_event row), and its redelivery is dead-lettered the same way
// instead of being retried.
func TestHandleJSON_UndecodableBodyIsDeadLetteredOnEveryDeliveryWithoutARow(t *testing.T) {
	for name, body := range map[string]string{
		"not json":   `not json`,
		"empty":      ``,
		"wrong type": `{"quantity":"two"}`,
		"truncated":  `{"orderNo":"o-1","quantity":`,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			var calls atomic.Int32
			h := f.typedChain(t, &calls)
			ev := f.prefix + "-bad"
			for redeliveries := range int32(2) {
				o, err := f.handle(h, f.rawMsg(ev, body, redeliveries))
				res := testenv.AnswerTo(t, o, err)
				require.Error(t, err)
				assert.Equal(t, consumer.KindDeadLetter, o.Kind, "delivery %d: %s", redeliveries, o)
				assert.Equal(t, causelabel.Permanent, o.Cause)
				assert.True(t, strings.HasPrefix(o.Reason, "undecodable body: "), "reason %q", o.Reason)
				assert.Greater(t, len(o.Reason), len("undecodable body: "), "the reason carries the codec's error")
				assert.Equal(t, testenv.DelayLevelDLQ, res.DelayLevel, "to the DLQ at once")
				assert.True(t, errors.Is(err, consumer.ErrUndecodableBody), "%v", err)
				assert.Equal(t, retry.ClassPermanent, retry.Classify(err))
				assert.Equal(t, 0, f.dedupRows(t, ev), "the claim was rolled back")
			}
			assert.Zero(t, calls.Load(), "the handler never ran")
			assert.Equal(t, 0, f.ledger.Count(t, ev))
		})
	}
}

// A typed handler built without a codec or without its function fails where it is built, not on every
// message.
func TestTyped_NilCodecOrFunctionPanicsAtConstruction(t *testing.T) {
	fn := func(context.Context, *sqlx.Tx, *consumer.Delivery, struct{}) (consumer.Outcome, error) {
		return consumer.Processed(), nil
	}
	assert.PanicsWithValue(t, "dedup.Typed: codec is nil (consumer.JSON{} decodes JSON bodies)", func() { dedup.Typed(nil, fn) })
	assert.PanicsWithValue(t, "dedup.Typed: the handler function is nil", func() { dedup.Typed[struct{}](consumer.JSON{}, nil) })
}
