package middleware_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// seen is a next handler that records the deliveries it gets.
type seen struct{ got []*consumer.Delivery }

func (s *seen) handle(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
	c := *d
	s.got = append(s.got, &c)
	return consumer.Processed(), nil
}

// runEventID builds EventID(cfg) around a recording handler and runs d through it.
func runEventID(t *testing.T, cfg middleware.EventIDConfig, d *consumer.Delivery) (consumer.Outcome, error, *seen) {
	t.Helper()
	mw, err := middleware.EventID(cfg)
	require.NoError(t, err)
	s := &seen{}
	o, herr := mw.Wrap(consumer.HandlerFunc(s.handle)).Handle(context.Background(), d)
	return o, herr, s
}

// requireUnidentifiable checks a message was dead-lettered as unidentifiable and never reached the handler.
func requireUnidentifiable(t *testing.T, o consumer.Outcome, err error, s *seen) {
	t.Helper()
	require.ErrorIs(t, err, middleware.ErrUnidentifiable)
	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.NotEmpty(t, o.Reason)
	assert.Empty(t, s.got, "the next handler must not run for an unidentifiable message")
	res := testenv.AnswerTo(t, o, err)
	assert.Equal(t, rmq.ConsumeRetryLater, res.Result, "an unidentifiable message is never acknowledged without a DLQ entry")
	assert.Equal(t, testenv.DelayLevelDLQ, res.DelayLevel, "an unidentifiable message goes to the DLQ at once, it is not retried")
}

func TestEventID_F11_PropertyPreferredOverKeys(t *testing.T) {
	o, err, s := runEventID(t, middleware.EventIDConfig{Extractors: []middleware.Extractor{middleware.FromProperty("EVENT_ID"), middleware.FromKeys()}},
		delivery("ORDER", "", map[string]string{"EVENT_ID": "evt-9", "KEYS": "pay-123"}))

	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	require.Len(t, s.got, 1)
	assert.Equal(t, "evt-9", s.got[0].EventID)
}

func TestEventID_F11_KeysUsedWhenNoPropertyAndConfigured(t *testing.T) {
	_, err, s := runEventID(t, middleware.EventIDConfig{Extractors: []middleware.Extractor{middleware.FromProperty("EVENT_ID"), middleware.FromKeys()}},
		delivery("ORDER", "", map[string]string{"KEYS": "pay-123 order-1"}))

	require.NoError(t, err)
	require.Len(t, s.got, 1)
	assert.Equal(t, "pay-123", s.got[0].EventID, "the first of the KEYS")
}

func TestEventID_F11_TwoPhysicalMessagesSameBusinessIDShareTheKey(t *testing.T) {
	mw, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	s := &seen{}
	h := mw.Wrap(consumer.HandlerFunc(s.handle))
	props := map[string]string{"EVENT_ID": "evt-9", "KEYS": "pay-123"}
	m1, m2 := msg("ORDER", "", props), msg("ORDER", "", props)
	m1.MsgId, m2.MsgId = "AC11000100002A9F0000000000000001", "AC11000100002A9F0000000000000002"

	_, err1 := h.Handle(context.Background(), testenv.NewDelivery("cg", m1))
	_, err2 := h.Handle(context.Background(), testenv.NewDelivery("cg", m2))

	require.NoError(t, err1)
	require.NoError(t, err2)
	require.Len(t, s.got, 2)
	assert.Equal(t, s.got[0].EventID, s.got[1].EventID, "the idempotency key is the business id, not the message id")
	assert.Equal(t, "evt-9", s.got[0].EventID)
}

func TestEventID_F11_CustomOrderJSONFieldFirst(t *testing.T) {
	cfg := middleware.EventIDConfig{Extractors: []middleware.Extractor{middleware.FromJSONField("eventId"), middleware.FromProperty("EVENT_ID")}}

	_, err, s := runEventID(t, cfg, delivery("ORDER", `{"eventId":"json-1"}`, map[string]string{"EVENT_ID": "prop-1"}))
	require.NoError(t, err)
	require.Len(t, s.got, 1)
	assert.Equal(t, "json-1", s.got[0].EventID, "the first extractor in the configured order wins")

	_, err, s = runEventID(t, cfg, delivery("ORDER", `{"other":1}`, map[string]string{"EVENT_ID": "prop-1"}))
	require.NoError(t, err)
	require.Len(t, s.got, 1)
	assert.Equal(t, "prop-1", s.got[0].EventID, "a missing JSON field falls through to the next extractor")
}

func TestEventID_F11_FromJSONFieldStringAndInteger(t *testing.T) {
	cfg := middleware.EventIDConfig{Extractors: []middleware.Extractor{middleware.FromJSONField("id")}}
	for body, want := range map[string]string{
		`{"id":"evt-42"}`:            "evt-42",
		`{"id":12345}`:               "12345",
		`{"id":-7, "amount": 1.5}`:   "-7",
		`{"nested":{"id":1},"id":9}`: "9",
	} {
		t.Run(body, func(t *testing.T) {
			_, err, s := runEventID(t, cfg, delivery("ORDER", body, nil))
			require.NoError(t, err)
			require.Len(t, s.got, 1)
			assert.Equal(t, want, s.got[0].EventID)
		})
	}
}

func TestEventID_F11_JSONFieldOfWrongTypeIsUnidentifiable(t *testing.T) {
	cfg := middleware.EventIDConfig{Extractors: []middleware.Extractor{middleware.FromJSONField("id")}}
	for _, body := range []string{`{"id":1.5}`, `{"id":true}`, `{"id":{"x":1}}`, `{"id":null}`, `{"id":""}`} {
		t.Run(body, func(t *testing.T) {
			o, err, s := runEventID(t, cfg, delivery("ORDER", body, nil))
			requireUnidentifiable(t, o, err, s)
		})
	}
}

func TestEventID_F11_InvalidJSONBodyIsUnidentifiable(t *testing.T) {
	cfg := middleware.EventIDConfig{Extractors: []middleware.Extractor{middleware.FromJSONField("eventId")}}

	o, err, s := runEventID(t, cfg, delivery("ORDER", `{"eventId": "e-1"`, nil))

	requireUnidentifiable(t, o, err, s)
	assert.Contains(t, o.Reason, "invalid JSON", "the DLQ reason says what was wrong with the body")
	assert.Contains(t, o.Reason, "JSON field eventId", "the DLQ reason names the source tried")
}

func TestEventID_F11_MissingIDIsDeadLetteredNeverRetried(t *testing.T) {
	o, err, s := runEventID(t, middleware.EventIDConfig{}, delivery("ORDER", `{"eventId":"e-1"}`, nil))

	requireUnidentifiable(t, o, err, s)
	assert.Contains(t, o.Reason, "property EVENT_ID")
	assert.Contains(t, o.Reason, "the producer must set it, or EventIDConfig.Extractors must name where it is", "the letter says how to fix it")
}

// KEYS usually carry a business key such as the order number, shared by every event of the order; taken as
// the event ID by default they would make OrderPaid a "duplicate" of OrderCreated and drop it. So the
// default reads only the EVENT_ID property, and a message with just KEYS is unidentifiable.
func TestEventID_F11_KeysAreNotAnEventIDByDefault(t *testing.T) {
	o, err, s := runEventID(t, middleware.EventIDConfig{},
		delivery("ORDER", "", map[string]string{"KEYS": "order-1"}))

	requireUnidentifiable(t, o, err, s)
}

func TestEventID_F11_BlankIDIsUnidentifiable(t *testing.T) {
	o, err, s := runEventID(t, middleware.EventIDConfig{}, delivery("ORDER", "", map[string]string{"EVENT_ID": "   "}))
	requireUnidentifiable(t, o, err, s)
}

func TestEventID_F11_InvalidUTF8IsUnidentifiable(t *testing.T) {
	o, err, s := runEventID(t, middleware.EventIDConfig{}, delivery("ORDER", "", map[string]string{"EVENT_ID": "e-\xff\xfe"}))
	requireUnidentifiable(t, o, err, s)
}

func TestEventID_F11_OverLongIDIsUnidentifiable(t *testing.T) {
	o, err, s := runEventID(t, middleware.EventIDConfig{}, delivery("ORDER", "", map[string]string{"EVENT_ID": strings.Repeat("a", 129)}))
	requireUnidentifiable(t, o, err, s)
	assert.Contains(t, o.Reason, "129")

	_, err, s = runEventID(t, middleware.EventIDConfig{}, delivery("ORDER", "", map[string]string{"EVENT_ID": strings.Repeat("a", 128)}))
	require.NoError(t, err, "128 characters is the column size and is accepted")
	require.Len(t, s.got, 1)
	assert.Len(t, s.got[0].EventID, 128)
}

func TestEventID_MaxLengthCountsCharactersNotBytes(t *testing.T) {
	id := strings.Repeat("é", 10) // 10 characters, 20 bytes
	_, err, s := runEventID(t, middleware.EventIDConfig{MaxLength: 10}, delivery("ORDER", "", map[string]string{"EVENT_ID": id}))
	require.NoError(t, err)
	require.Len(t, s.got, 1)
	assert.Equal(t, id, s.got[0].EventID)

	o, err, s := runEventID(t, middleware.EventIDConfig{MaxLength: 9}, delivery("ORDER", "", map[string]string{"EVENT_ID": id}))
	requireUnidentifiable(t, o, err, s)
}

func TestEventID_F11_FallbackToMsgIDOnlyWhenEnabled(t *testing.T) {
	d := delivery("ORDER", "", nil)
	o, err, s := runEventID(t, middleware.EventIDConfig{}, d)
	requireUnidentifiable(t, o, err, s)

	_, err, s = runEventID(t, middleware.EventIDConfig{FallbackToMsgID: true}, delivery("ORDER", "", nil))
	require.NoError(t, err)
	require.Len(t, s.got, 1)
	assert.Equal(t, d.Msg.MsgId, s.got[0].EventID)

	_, err, s = runEventID(t, middleware.EventIDConfig{FallbackToMsgID: true}, delivery("ORDER", "", map[string]string{"EVENT_ID": "evt-1"}))
	require.NoError(t, err)
	require.Len(t, s.got, 1)
	assert.Equal(t, "evt-1", s.got[0].EventID, "the fallback is used only when no extractor finds an ID")
}

func TestEventID_InvalidConfigIsAnError(t *testing.T) {
	for name, cfg := range map[string]middleware.EventIDConfig{
		"MaxLength 500":               {MaxLength: 500},
		"MaxLength negative":          {MaxLength: -1},
		"extractor without func":      {Extractors: []middleware.Extractor{{Name: "broken"}}},
		"extractor without name":      {Extractors: []middleware.Extractor{{Extract: func(*consumer.Delivery) (string, error) { return "x", nil }}}},
		"type extractor without func": {TypeExtractors: []middleware.Extractor{{Name: "broken"}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := middleware.EventID(cfg)
			assert.Error(t, err)
		})
	}
	_, err := middleware.EventID(middleware.EventIDConfig{MaxLength: 500})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MaxLength", "the error names the field")
}

func TestEventID_EventTypeDefaultsToPropertyThenTag(t *testing.T) {
	_, err, s := runEventID(t, middleware.EventIDConfig{},
		delivery("ORDER", "", map[string]string{"EVENT_ID": "e-1", "EVENT_TYPE": "OrderPaid", "TAGS": "OrderCreated"}))
	require.NoError(t, err)
	require.Len(t, s.got, 1)
	assert.Equal(t, "OrderPaid", s.got[0].EventType)

	_, err, s = runEventID(t, middleware.EventIDConfig{},
		delivery("ORDER", "", map[string]string{"EVENT_ID": "e-1", "TAGS": "OrderCreated"}))
	require.NoError(t, err)
	require.Len(t, s.got, 1)
	assert.Equal(t, "OrderCreated", s.got[0].EventType)

	_, err, s = runEventID(t, middleware.EventIDConfig{}, delivery("ORDER", "", map[string]string{"EVENT_ID": "e-1"}))
	require.NoError(t, err)
	require.Len(t, s.got, 1)
	assert.Empty(t, s.got[0].EventType, "no type found leaves EventType empty and is not an error")
}

func TestEventID_AggregateIDFromProperty(t *testing.T) {
	_, err, s := runEventID(t, middleware.EventIDConfig{},
		delivery("ORDER", "", map[string]string{"EVENT_ID": "e-1", "AGGREGATE_ID": "order-1"}))
	require.NoError(t, err)
	require.Len(t, s.got, 1)
	assert.Equal(t, "order-1", s.got[0].AggregateID)
}

func TestEventID_FromFuncErrorIsPartOfTheReason(t *testing.T) {
	cfg := middleware.EventIDConfig{Extractors: []middleware.Extractor{
		middleware.FromFunc("header X", func(*consumer.Delivery) (string, error) { return "", errors.New("header X malformed") }),
	}}

	o, err, s := runEventID(t, cfg, delivery("ORDER", "", nil))

	requireUnidentifiable(t, o, err, s)
	assert.Contains(t, o.Reason, "header X malformed")
}

func TestEventID_F4_ExtractionSeesTheRestoredTopic(t *testing.T) {
	var gotTopic string
	cfg := middleware.EventIDConfig{Extractors: []middleware.Extractor{
		middleware.FromFunc("topic-scoped", func(d *consumer.Delivery) (string, error) {
			gotTopic = d.Topic
			return d.Topic + ":" + d.Msg.GetProperty("EVENT_ID"), nil
		}),
	}}
	m := msg("%RETRY%cg", "", map[string]string{"EVENT_ID": "e-1", "RETRY_TOPIC": "ORDER"})
	m.ReconsumeTimes = 2

	_, err, s := runEventID(t, cfg, testenv.NewDelivery("cg", m))

	require.NoError(t, err)
	assert.Equal(t, "ORDER", gotTopic)
	require.Len(t, s.got, 1)
	assert.Equal(t, "ORDER:e-1", s.got[0].EventID)
	assert.Equal(t, 2, s.got[0].Attempt)
}

func TestEventID_DeadLetterSurvivesClassify(t *testing.T) {
	mw, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	s := &seen{}

	o, herr := testenv.Must(middleware.Chain(consumer.HandlerFunc(s.handle), middleware.Classify(), mw)).Handle(context.Background(), delivery("ORDER", "", nil))

	requireUnidentifiable(t, o, herr, s)
}

// F27: a body that starts with a UTF-8 byte-order mark (as .NET's Encoding.UTF8 writes it) is still JSON;
// the event ID in its eventId field is found, not dead-lettered as unidentifiable.
func TestEventID_F27_JSONBodyWithUTF8BOM(t *testing.T) {
	cfg := middleware.EventIDConfig{Extractors: []middleware.Extractor{middleware.FromJSONField("eventId")}}
	body := "\xEF\xBB\xBF" + `{"eventId":"evt-bom-1","orderNo":"o-1"}`

	o, err, s := runEventID(t, cfg, delivery("ORDER", body, nil))

	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	require.Len(t, s.got, 1)
	assert.Equal(t, "evt-bom-1", s.got[0].EventID)
}

// F27: only a leading BOM is skipped; a BOM anywhere else is not JSON whitespace and the body stays invalid.
func TestEventID_F27_BOMInsideTheBodyIsStillInvalid(t *testing.T) {
	cfg := middleware.EventIDConfig{Extractors: []middleware.Extractor{middleware.FromJSONField("eventId")}}

	o, err, s := runEventID(t, cfg, delivery("ORDER", ` `+"\xEF\xBB\xBF"+`{"eventId":"e-1"}`, nil))

	requireUnidentifiable(t, o, err, s)
	assert.Contains(t, o.Reason, "invalid JSON")
}
