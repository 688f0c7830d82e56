package middleware

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/retry"
)

// ErrUnidentifiable marks a message that carries no usable business event ID; such a message is
// dead-lettered at once (retrying cannot give it an ID). Test with errors.Is.
var ErrUnidentifiable = errors.New("unidentifiable message: no business event ID")

// errNotFound is returned by an extractor that found no value; the next extractor is tried.
var errNotFound = errors.New("not present")

// Extractor finds one value (an event ID or an event type) in a delivery. Extract returns the value, or an
// error saying why it could not (absent, invalid body); the error becomes part of the DLQ reason.
type Extractor struct {
	// Name describes the source, e.g. `property EVENT_ID`; it appears in DLQ reasons and logs.
	Name string
	// Extract reads the value. It must not modify the delivery.
	Extract func(d *consumer.Delivery) (string, error)
}

// FromProperty reads the user property name (e.g. "EVENT_ID").
func FromProperty(name string) Extractor {
	return Extractor{Name: "property " + name, Extract: func(d *consumer.Delivery) (string, error) {
		if v := d.Msg.GetProperty(name); v != "" {
			return v, nil
		}
		return "", errNotFound
	}}
}

// FromKeys reads the first of the message's KEYS (space-separated, as the client joins them).
func FromKeys() Extractor {
	return Extractor{Name: "KEYS", Extract: func(d *consumer.Delivery) (string, error) {
		if f := strings.Fields(d.Msg.GetKeys()); len(f) > 0 {
			return f[0], nil
		}
		return "", errNotFound
	}}
}

// FromTag reads the message's tag.
func FromTag() Extractor {
	return Extractor{Name: "tag", Extract: func(d *consumer.Delivery) (string, error) {
		if t := d.Msg.GetTags(); t != "" {
			return t, nil
		}
		return "", errNotFound
	}}
}

// utf8BOM is the UTF-8 byte-order mark some producers (.NET's Encoding.UTF8, Windows tools) put before
// a JSON text; RFC 8259 lets a parser ignore it, encoding/json does not.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// FromJSONField reads a top-level field of a JSON object body; a string or an integer value (any number
// of digits) is accepted. A leading UTF-8 byte-order mark is skipped. A body that is not valid JSON, or
// not an object, fails with an error saying so.
func FromJSONField(field string) Extractor {
	return Extractor{Name: "JSON field " + field, Extract: func(d *consumer.Delivery) (string, error) {
		var obj map[string]json.RawMessage
		body := bytes.TrimPrefix(d.Msg.Body, utf8BOM)
		if !json.Valid(body) {
			return "", errors.New("invalid JSON body")
		}
		if err := json.Unmarshal(body, &obj); err != nil {
			return "", fmt.Errorf("JSON body is not an object: %w", err)
		}
		raw, ok := obj[field]
		if !ok || string(raw) == "null" {
			return "", errNotFound
		}
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return s, nil
		}
		var n json.Number
		if err := json.Unmarshal(raw, &n); err == nil && isInteger(string(n)) {
			return string(n), nil
		}
		return "", fmt.Errorf("field %s is neither a string nor an integer", field)
	}}
}

// isInteger reports whether s is a JSON integer literal of any length (no fraction, no exponent).
func isInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// FromFunc wraps a custom extraction function under a name.
func FromFunc(name string, f func(d *consumer.Delivery) (string, error)) Extractor {
	return Extractor{Name: name, Extract: f}
}

// EventIDConfig configures the EventID middleware.
type EventIDConfig struct {
	// Extractors are tried in order; the first non-empty value is the event ID.
	// Default: FromProperty("EVENT_ID") alone. FromKeys is opt-in: KEYS often hold a business key shared by
	// several events (the order number of OrderCreated and OrderPaid), which would make the later events
	// look like duplicates and drop them. Use it only where KEYS are unique per event.
	Extractors []Extractor
	// TypeExtractors find the event type, tried in order; none found leaves EventType empty.
	// Default: FromProperty("EVENT_TYPE"), then FromTag().
	TypeExtractors []Extractor
	// AggregateExtractors find the aggregate ID, tried in order; none found leaves AggregateID empty.
	// Default: FromProperty("AGGREGATE_ID").
	AggregateExtractors []Extractor
	// MaxLength is the longest accepted event ID in characters. Default and upper bound:
	// 128 (what the processed_event column holds).
	MaxLength int
	// FallbackToMsgID uses the RocketMQ message ID when no extractor finds an ID. Off by default: a message
	// ID names one physical message, and a business re-send gets a new one (the idempotency key must be
	// the business event's ID, never the message's), so the fallback lets re-sends through as new events. Turn it on only for producers that never re-send.
	FallbackToMsgID bool
}

// EventID finds each message's business event ID (the idempotency key), event type and aggregate ID and
// stores them on the Delivery. A message whose ID is missing, empty, not valid UTF-8 or longer than
// MaxLength is dead-lettered at once (Cause "unidentifiable") with a reason naming every source
// tried and the fix (the producer sets the ID, or EventIDConfig.Extractors names where it is); the error is permanent (retry.Permanent) and wraps ErrUnidentifiable. It returns an error naming the field when cfg is invalid.
func EventID(cfg EventIDConfig) (Middleware, error) {
	if len(cfg.Extractors) == 0 {
		cfg.Extractors = []Extractor{FromProperty("EVENT_ID")}
	}
	if cfg.TypeExtractors == nil {
		cfg.TypeExtractors = []Extractor{FromProperty("EVENT_TYPE"), FromTag()}
	}
	if cfg.AggregateExtractors == nil {
		cfg.AggregateExtractors = []Extractor{FromProperty("AGGREGATE_ID")}
	}
	if cfg.MaxLength == 0 {
		cfg.MaxLength = dedupsql.MaxEventIDLength
	}
	if cfg.MaxLength < 1 || cfg.MaxLength > dedupsql.MaxEventIDLength {
		return Middleware{}, fmt.Errorf("event ID config: MaxLength: %d is outside 1..%d (the processed_event column)", cfg.MaxLength, dedupsql.MaxEventIDLength)
	}
	for _, list := range [][]Extractor{cfg.Extractors, cfg.TypeExtractors, cfg.AggregateExtractors} {
		for i, x := range list {
			if x.Extract == nil || x.Name == "" {
				return Middleware{}, fmt.Errorf("event ID config: extractor %d (%q) needs a Name and an Extract func", i, x.Name)
			}
		}
	}
	return Middleware{kind: kindEventID, wrap: (&eventIDMW{cfg: cfg}).wrap}, nil
}

// eventIDMW is an EventID middleware; Chain knows it by its Middleware's kind.
type eventIDMW struct{ cfg EventIDConfig }

func (w *eventIDMW) wrap(next consumer.Handler) consumer.Handler {
	return &eventIDHandler{cfg: w.cfg, next: next}
}

// eventIDHandler is the handler an eventIDMW wraps around next.
type eventIDHandler struct {
	cfg  EventIDConfig
	next consumer.Handler
}

func (h *eventIDHandler) Handle(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
	id, err := extractID(h.cfg, d)
	if err != nil {
		return withCause(consumer.DeadLetter(err.Error()), causelabel.Unidentifiable), retry.Permanent(err)
	}
	d.EventID = id
	d.EventType = first(h.cfg.TypeExtractors, d)
	d.AggregateID = first(h.cfg.AggregateExtractors, d)
	return h.next.Handle(ctx, d)
}

// miss is one extractor that found nothing, kept to explain a dead letter (no event ID, no aggregate version).
type miss struct {
	name string
	err  error
}

// extractID returns d's event ID: the first non-blank value of cfg.Extractors (then the message ID when
// cfg.FallbackToMsgID), checked for UTF-8 and length. What the extractors missed is kept in a small array on
// the stack and turned into text only when no ID is found, so a message with an ID allocates nothing here.
func extractID(cfg EventIDConfig, d *consumer.Delivery) (string, error) {
	var buf [4]miss
	id, misses := search(cfg.Extractors, d, buf[:0])
	if id == "" && cfg.FallbackToMsgID {
		id = d.Msg.MsgId
	}
	switch {
	case id == "":
		return "", fmt.Errorf("%w (%s): the producer must set it, or EventIDConfig.Extractors must name where it is", ErrUnidentifiable, explain(misses))
	case !utf8.ValidString(id):
		return "", fmt.Errorf("%w: event ID is not valid UTF-8", ErrUnidentifiable)
	case utf8.RuneCountInString(id) > cfg.MaxLength:
		return "", fmt.Errorf("%w: event ID is %d characters, longer than %d", ErrUnidentifiable, utf8.RuneCountInString(id), cfg.MaxLength)
	}
	return id, nil
}

// explain joins the misses as "<name>: <why>; <name>: <why>", the text of an unidentifiable message's reason.
func explain(misses []miss) string {
	notes := make([]string, len(misses))
	for i, m := range misses {
		notes[i] = m.name + ": " + m.err.Error()
	}
	return strings.Join(notes, "; ")
}

// search returns the first non-blank value the extractors find, and the misses of the extractors tried
// before it, appended to misses (pass a slice of a caller's array to keep them off the heap).
func search(xs []Extractor, d *consumer.Delivery, misses []miss) (string, []miss) {
	for _, x := range xs {
		v, err := x.Extract(d)
		if v = strings.TrimSpace(v); err == nil && v != "" {
			return v, misses
		}
		if err == nil {
			err = errNotFound
		}
		misses = append(misses, miss{x.Name, err})
	}
	return "", misses
}

// first returns the first non-blank value the extractors find, or "" when none does (the optional fields:
// event type, aggregate ID); it keeps no misses, so it allocates nothing unless an extractor does.
func first(xs []Extractor, d *consumer.Delivery) string {
	for _, x := range xs {
		if v, err := x.Extract(d); err == nil {
			if v = strings.TrimSpace(v); v != "" {
				return v
			}
		}
	}
	return ""
}
