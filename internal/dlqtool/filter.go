package dlqtool

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Filter selects letters; zero fields select everything, and a letter must match every field set.
type Filter struct {
	// Since and Until bound FailedAt (Since inclusive, Until exclusive); zero = unbounded.
	Since, Until time.Time
	// EventType selects letters whose EventType equals it.
	EventType string
	// Reason selects letters whose Reason contains it (case-sensitive).
	Reason string
	// Key selects letters whose KEYS (space-separated) include it, or whose EventID equals it.
	Key string
	// OriginTopic selects letters whose OriginTopic equals it.
	OriginTopic string
}

// match reports whether l passes every condition of f.
func (f Filter) match(l Letter) bool {
	switch {
	case !f.Since.IsZero() && l.FailedAt.Before(f.Since):
		return false
	case !f.Until.IsZero() && !l.FailedAt.Before(f.Until):
		return false
	case f.EventType != "" && l.EventType != f.EventType:
		return false
	case f.Reason != "" && !strings.Contains(l.Reason, f.Reason):
		return false
	case f.Key != "" && l.EventID != f.Key && !hasKey(l.Keys, f.Key):
		return false
	case f.OriginTopic != "" && l.OriginTopic != f.OriginTopic:
		return false
	}
	return true
}

// hasKey reports whether the space-separated KEYS include key.
func hasKey(keys, key string) bool {
	for _, k := range strings.Fields(keys) {
		if k == key {
			return true
		}
	}
	return false
}

// utf8BOM is the byte-order mark some producers put before a JSON body.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// eventID returns m's event ID: the configured property, else the configured JSON field of the body (a
// string or a number), else "".
func (o ScanOptions) eventID(m *primitive.MessageExt) string {
	prop := o.EventIDProperty
	if prop == "" {
		prop = defaultEventIDProperty
	}
	if id := m.GetProperty(prop); id != "" {
		return id
	}
	if o.EventIDJSONField == "" {
		return ""
	}
	var body map[string]json.RawMessage
	if json.Unmarshal(bytes.TrimPrefix(m.Body, utf8BOM), &body) != nil {
		return ""
	}
	raw := body[o.EventIDJSONField]
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}
