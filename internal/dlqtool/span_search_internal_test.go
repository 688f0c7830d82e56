package dlqtool

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
)

// closestQueue is a queue whose letters were stored at the given times, answering the broker's search by
// store time as RocketMQ 4.x does (ConsumeQueue.getOffsetInQueueByTime before BoundaryType): the offset of
// the letter whose store time is CLOSEST to the timestamp, which may be a letter stored before it.
// Brokers before 4.9.2 are exactly those that create %DLQ%<group> write-only (F17), so the scan meets them.
type closestQueue struct{ stored []time.Time }

func (q *closestQueue) PullFrom(_ context.Context, _ *primitive.MessageQueue, offset int64, n int) (*primitive.PullResult, error) {
	max := int64(len(q.stored))
	if offset >= probeOffset {
		return &primitive.PullResult{Status: primitive.PullOffsetIllegal, MinOffset: 0, MaxOffset: max, NextBeginOffset: max}, nil
	}
	res := &primitive.PullResult{Status: primitive.PullFound}
	for o := offset; o < max && o < offset+int64(n); o++ {
		m := &primitive.MessageExt{QueueOffset: o, StoreTimestamp: q.stored[o].UnixMilli()}
		res.SetMessageExts(append(res.GetMessageExts(), m))
		res.NextBeginOffset = o + 1
	}
	return res, nil
}

func (q *closestQueue) OffsetForTimestamp(_ *primitive.MessageQueue, ts int64) (int64, error) {
	best, bestDist := int64(0), int64(-1)
	for o, at := range q.stored {
		d := at.UnixMilli() - ts
		if d < 0 {
			d = -d
		}
		if bestDist < 0 || d < bestDist {
			best, bestDist = int64(o), d
		}
	}
	return best, nil
}

// A letter dead-lettered before Until must be read whatever the broker's search answers: with a 4.x broker
// the "closest" letter to Until+skew can be the last one stored before it, and using that offset as the
// exclusive end drops it — while the scan still says Complete.
func TestPlanSpans_UntilKeepsTheLetterTheSearchLandsOn(t *testing.T) {
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		stored []time.Time
		until  time.Time
	}{
		// Until after every letter (e.g. --until 1m ago, last letter 10 min ago): the closest is the last letter.
		"until after the last letter": {[]time.Time{base, base.Add(time.Minute), base.Add(2 * time.Minute)}, base.Add(time.Hour)},
		// A letter 10 s before Until, the next one an hour later: closest to Until+1m is the letter before.
		"letter just before until": {[]time.Time{base, base.Add(time.Hour)}, base.Add(10 * time.Second)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			q := &closestQueue{stored: c.stored}
			res := ScanResult{Complete: true}
			mq := &primitive.MessageQueue{Topic: "%DLQ%g", BrokerName: "b"}
			var selected []int64
			for _, s := range planSpans(context.Background(), q, []*primitive.MessageQueue{mq}, ScanOptions{Filter: Filter{Until: c.until}}, &res) {
				readSpan(context.Background(), q, s, &res, func(m *primitive.MessageExt) bool {
					if time.UnixMilli(m.StoreTimestamp).Before(c.until) {
						selected = append(selected, m.QueueOffset)
					}
					return true
				})
			}
			var want []int64
			for o, at := range c.stored {
				if at.Before(c.until) {
					want = append(want, int64(o))
				}
			}
			assert.True(t, res.Complete)
			assert.Equal(t, want, selected, "letters stored before Until")
		})
	}
}
