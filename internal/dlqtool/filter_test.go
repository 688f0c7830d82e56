package dlqtool_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

func TestFilter_MatchesEveryFieldSet(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := dlqtool.Letter{EventID: "e-1", EventType: "OrderCreated", Reason: "invalid JSON: eof", Keys: "o-1 o-2", FailedAt: at, OriginTopic: "ORDER"}
	match := map[string]dlqtool.Filter{
		"zero":               {},
		"since inclusive":    {Since: at},
		"until exclusive":    {Until: at.Add(time.Nanosecond)},
		"type":               {EventType: "OrderCreated"},
		"reason substring":   {Reason: "JSON"},
		"second key":         {Key: "o-2"},
		"event ID as key":    {Key: "e-1"},
		"origin topic":       {OriginTopic: "ORDER"},
		"everything at once": {Since: at.Add(-time.Hour), Until: at.Add(time.Hour), EventType: "OrderCreated", Reason: "eof", Key: "o-1"},
	}
	for name, f := range match {
		assert.True(t, f.Match(l), name)
	}
	miss := map[string]dlqtool.Filter{
		"before since":    {Since: at.Add(time.Nanosecond)},
		"at until":        {Until: at},
		"other type":      {EventType: "OrderPaid"},
		"reason case":     {Reason: "json"},
		"partial key":     {Key: "o-"},
		"other origin":    {OriginTopic: "ORD"},
		"one field fails": {EventType: "OrderCreated", Key: "o-3"},
	}
	for name, f := range miss {
		assert.False(t, f.Match(l), name)
	}
}
