package dlqtool_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
)

// Until after the newest letter (the common "--until 10m" on a DLQ whose last letter is older) and Until
// between two letters far apart both keep every letter stored before Until on the real broker.
func TestScan_UntilAfterTheLastLetterKeepsIt(t *testing.T) {
	w := newDLQWorld(t, 6, 1)
	w.publish(letter{eventID: "first", eventType: "T", reason: "r"})
	time.Sleep(1200 * time.Millisecond)
	w.publish(letter{eventID: "last", eventType: "T", reason: "r"})
	skew := 100 * time.Millisecond
	for _, until := range []time.Time{time.Now().Add(time.Hour), time.Now().Add(2 * time.Second)} {
		res := w.scan(dlqtool.ScanOptions{Filter: dlqtool.Filter{Until: until}, ClockSkew: skew})
		assert.True(t, res.Complete, "problems: %v", res.Problems)
		assert.Equal(t, []string{"first", "last"}, eventIDs(res.Letters), "until %s", until)
	}
}
