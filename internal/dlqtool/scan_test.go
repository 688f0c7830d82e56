package dlqtool_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/topics"
)

// eventIDs returns the letters' event IDs, sorted.
func eventIDs(ls []dlqtool.Letter) []string {
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.EventID)
	}
	sortStrings(out)
	return out
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// Five letters on two queues: the full scan is complete and each letter carries what the publisher recorded;
// every filter selects exactly its letters.
func TestScan_FiltersSelectLettersAndTheFullScanIsComplete(t *testing.T) {
	w := newDLQWorld(t, 6, 2)
	now := time.Now().UTC()
	sent := w.publish(letter{eventID: "e-1", eventType: "OrderCreated", keys: "o-1", reason: "invalid JSON: x", at: now.Add(-3 * time.Hour), body: []byte(`{"a":1}`), props: map[string]string{"traceparent": "00-t1"}})
	w.publish(letter{eventID: "e-2", eventType: "OrderPaid", keys: "o-1", reason: "retries exhausted after 3", at: now.Add(-2 * time.Hour)})
	w.publish(letter{eventID: "e-3", eventType: "OrderCreated", keys: "o-3", reason: "unidentifiable message", at: now.Add(-time.Hour)})
	w.publish(letter{eventID: "e-4", eventType: "OrderCreated", keys: "o-4", reason: "invalid JSON: y", at: now})
	w.publish(letter{eventID: "e-5", eventType: "OrderCancelled", reason: "", at: now})

	all := w.scan(dlqtool.ScanOptions{})
	require.True(t, all.Complete, "problems: %v", all.Problems)
	assert.Empty(t, all.Problems)
	assert.Equal(t, []string{"e-1", "e-2", "e-3", "e-4", "e-5"}, eventIDs(all.Letters))
	assert.Equal(t, 5, all.Read)
	var e1 dlqtool.Letter
	for _, l := range all.Letters {
		if l.EventID == "e-1" {
			e1 = l
		}
	}
	assert.Equal(t, w.group, e1.Group)
	assert.Equal(t, "%DLQ%"+w.group, e1.Topic)
	assert.Equal(t, sent.MsgID, e1.MsgID)
	assert.Equal(t, sent.OffsetMsgID, e1.StoreID)
	assert.Equal(t, "ORDER", e1.OriginTopic)
	assert.Equal(t, "OrderCreated", e1.EventType)
	assert.Equal(t, "invalid JSON: x", e1.Reason)
	assert.Equal(t, 3, e1.Attempts)
	assert.True(t, now.Add(-3*time.Hour).Equal(e1.FailedAt), "FailedAt %s", e1.FailedAt)
	assert.Equal(t, "o-1", e1.Keys)
	assert.Equal(t, []byte(`{"a":1}`), e1.Body)
	assert.Equal(t, "00-t1", e1.Property("traceparent"))

	cases := map[string]struct {
		f    dlqtool.Filter
		want []string
	}{
		"event type":        {dlqtool.Filter{EventType: "OrderCreated"}, []string{"e-1", "e-3", "e-4"}},
		"reason contains":   {dlqtool.Filter{Reason: "invalid JSON"}, []string{"e-1", "e-4"}},
		"key in KEYS":       {dlqtool.Filter{Key: "o-1"}, []string{"e-1", "e-2"}},
		"key is event ID":   {dlqtool.Filter{Key: "e-5"}, []string{"e-5"}},
		"since (inclusive)": {dlqtool.Filter{Since: now.Add(-time.Hour)}, []string{"e-3", "e-4", "e-5"}},
		"all of them":       {dlqtool.Filter{EventType: "OrderCreated", Reason: "JSON", Since: now.Add(-150 * time.Minute)}, []string{"e-4"}},
		"nothing":           {dlqtool.Filter{EventType: "Nope"}, []string{}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			res := w.scan(dlqtool.ScanOptions{Filter: c.f})
			assert.True(t, res.Complete, "problems: %v", res.Problems)
			assert.Equal(t, c.want, eventIDs(res.Letters))
		})
	}
}

// A limit that stops the scan with letters left unread makes it incomplete and says so; a limit equal to
// what there is does not.
func TestScan_LimitHitIsIncomplete(t *testing.T) {
	w := newDLQWorld(t, 6, 1)
	for _, id := range []string{"e-1", "e-2", "e-3"} {
		w.publish(letter{eventID: id, eventType: "T", reason: "r"})
	}
	res := w.scan(dlqtool.ScanOptions{Limit: 2})
	assert.False(t, res.Complete)
	assert.True(t, res.LimitHit)
	assert.Equal(t, []string{"e-1", "e-2"}, eventIDs(res.Letters))
	require.Len(t, res.Problems, 1)
	assert.Contains(t, res.Problems[0], "limit 2 reached")

	exact := w.scan(dlqtool.ScanOptions{Limit: 3})
	assert.True(t, exact.Complete, "problems: %v", exact.Problems)
	assert.False(t, exact.LimitHit)
	assert.Len(t, exact.Letters, 3)
}

// Since and Until narrow the offsets read through the broker's time search (Read counts what was pulled),
// and the letters are matched on their dead-lettering time.
func TestScan_TimeBoundsNarrowTheOffsetsRead(t *testing.T) {
	w := newDLQWorld(t, 6, 1)
	w.publish(letter{eventID: "early", eventType: "T", reason: "r"})
	time.Sleep(1500 * time.Millisecond)
	mid := time.Now()
	time.Sleep(1500 * time.Millisecond)
	w.publish(letter{eventID: "late", eventType: "T", reason: "r"})

	skew := 200 * time.Millisecond // the broker runs on this host: its store time and our clock agree
	since := w.scan(dlqtool.ScanOptions{Filter: dlqtool.Filter{Since: mid}, ClockSkew: skew})
	assert.True(t, since.Complete, "problems: %v", since.Problems)
	assert.Equal(t, []string{"late"}, eventIDs(since.Letters))
	assert.Equal(t, 1, since.Read, "the letter before Since is not even pulled")

	until := w.scan(dlqtool.ScanOptions{Filter: dlqtool.Filter{Until: mid}, ClockSkew: skew})
	assert.True(t, until.Complete, "problems: %v", until.Problems)
	assert.Equal(t, []string{"early"}, eventIDs(until.Letters))
	assert.Equal(t, 1, until.Read, "the letter after Until is not even pulled")

	_, err := dlqtool.Scan(w.ctx, w.cluster, w.group, dlqtool.ScanOptions{Filter: dlqtool.Filter{Since: mid, Until: mid}})
	assert.ErrorContains(t, err, "is not before Until")
}

// The event ID comes from the configured property, else from the configured JSON field of the body.
func TestScan_EventIDFromPropertyOrJSONField(t *testing.T) {
	w := newDLQWorld(t, 6, 1)
	w.publish(letter{eventType: "T", reason: "r", body: []byte("\xef\xbb\xbf{\"eventId\":\"from-json\"}")})
	w.publish(letter{eventType: "T", reason: "r", props: map[string]string{"BIZ_ID": "from-prop"}, body: []byte(`{"eventId":"ignored"}`)})

	plain := w.scan(dlqtool.ScanOptions{})
	assert.Equal(t, []string{"", ""}, eventIDs(plain.Letters), "no EVENT_ID property, no JSON field configured")
	res := w.scan(dlqtool.ScanOptions{EventIDProperty: "BIZ_ID", EventIDJSONField: "eventId"})
	assert.Equal(t, []string{"from-json", "from-prop"}, eventIDs(res.Letters))
}

// An existing but empty DLQ is a complete scan with no letter; a DLQ that does not exist is ErrNoDLQ, and
// Read reports both as before (empty; ErrNoReadableRoute).
func TestScan_EmptyAndMissingDLQ(t *testing.T) {
	w := newDLQWorld(t, 6, 4)
	res := w.scan(dlqtool.ScanOptions{})
	assert.True(t, res.Complete, "problems: %v", res.Problems)
	assert.Empty(t, res.Letters)
	msgs, err := dlqtool.Read(w.ctx, topics.Cluster{NameServers: w.ns}, w.group, 0)
	require.NoError(t, err)
	assert.Empty(t, msgs)

	missing := newDLQWorld(t, 0, 0)
	_, err = dlqtool.Scan(missing.ctx, missing.cluster, missing.group, dlqtool.ScanOptions{})
	require.ErrorIs(t, err, dlqtool.ErrNoDLQ)
	assert.Contains(t, err.Error(), "%DLQ%"+missing.group+" does not exist (created on the first dead letter)")
	_, err = dlqtool.Read(missing.ctx, topics.Cluster{NameServers: missing.ns}, missing.group, 0)
	assert.ErrorIs(t, err, dlqtool.ErrNoReadableRoute)
	assert.False(t, strings.Contains(err.Error(), "write-only ("), "a missing DLQ is not called write-only: %v", err)
}
