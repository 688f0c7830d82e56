package dlqtool

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
)

// fakeQueue is one queue of a broker as a puller: messages at offsets [min, max), with scripted answers.
type fakeQueue struct {
	min, max int64
	// removeBelow, when set, is the min offset after the first pull: letters expiring during the scan.
	removeBelow int64
	// failAt makes the pull at that offset fail (-1: never).
	failAt int64
	// emptyAt makes the pull at that offset answer "no new message" (-1: never).
	emptyAt int64
	// stuck makes a found pull answer a next offset that does not advance.
	stuck bool
	pulls int
}

func (q *fakeQueue) PullFrom(_ context.Context, _ *primitive.MessageQueue, offset int64, n int) (*primitive.PullResult, error) {
	q.pulls++
	if offset >= probeOffset {
		return &primitive.PullResult{Status: primitive.PullOffsetIllegal, MinOffset: q.min, MaxOffset: q.max, NextBeginOffset: q.max}, nil
	}
	if q.removeBelow > 0 && q.pulls > 2 {
		q.min = q.removeBelow
	}
	switch {
	case offset == q.failAt:
		return nil, errors.New("broker unreachable")
	case offset == q.emptyAt:
		return &primitive.PullResult{Status: primitive.PullNoNewMsg, NextBeginOffset: offset}, nil
	case offset < q.min:
		return &primitive.PullResult{Status: primitive.PullOffsetIllegal, NextBeginOffset: q.min}, nil
	}
	res := &primitive.PullResult{Status: primitive.PullFound}
	for o := offset; o < q.max && o < offset+int64(n); o++ {
		m := &primitive.MessageExt{QueueOffset: o}
		res.SetMessageExts(append(res.GetMessageExts(), m))
		res.NextBeginOffset = o + 1
	}
	if q.stuck {
		res.NextBeginOffset = offset
	}
	return res, nil
}

func (q *fakeQueue) OffsetForTimestamp(*primitive.MessageQueue, int64) (int64, error) { return 0, nil }

func readAll(q *fakeQueue) (ScanResult, []int64) {
	res := ScanResult{Complete: true}
	mq := &primitive.MessageQueue{Topic: "%DLQ%g", BrokerName: "b", QueueId: 0}
	spans := planSpans(context.Background(), q, []*primitive.MessageQueue{mq}, ScanOptions{}, &res)
	var got []int64
	for _, s := range spans {
		readSpan(context.Background(), q, s, &res, func(m *primitive.MessageExt) bool {
			got = append(got, m.QueueOffset)
			return true
		})
	}
	return res, got
}

// The scan reads from the min offset to the max captured at the start, in batches, and is complete.
func TestReadSpan_ReadsMinToMaxInBatches(t *testing.T) {
	q := &fakeQueue{min: 3, max: 3 + pullBatch + 5, failAt: -1, emptyAt: -1}
	res, got := readAll(q)
	assert.True(t, res.Complete, "%v", res.Problems)
	assert.Len(t, got, pullBatch+5)
	assert.Equal(t, int64(3), got[0])
	assert.Equal(t, 3, q.pulls, "a probe and two batches, no pull at the end")
}

// Letters that expire during the scan are skipped and counted, not reported as a failure.
func TestReadSpan_LettersExpiringDuringTheScanAreCounted(t *testing.T) {
	q := &fakeQueue{min: 0, max: 100, removeBelow: 80, failAt: -1, emptyAt: -1}
	res, got := readAll(q)
	assert.True(t, res.Complete, "%v", res.Problems)
	assert.Equal(t, int64(80-pullBatch), res.Expired)
	assert.Len(t, got, pullBatch+20)
}

// A pull error, a broker answer of "nothing" below the captured end, or no progress each make the scan
// incomplete with a problem naming the queue and offset — never a silent short result.
func TestReadSpan_TroubleMakesTheScanIncomplete(t *testing.T) {
	cases := map[string]struct {
		q    *fakeQueue
		want string
	}{
		"pull error": {&fakeQueue{max: 50, failAt: pullBatch, emptyAt: -1}, "queue 0 on b: pull at offset 32: broker unreachable"},
		"no message": {&fakeQueue{max: 50, failAt: -1, emptyAt: pullBatch}, "the broker has no letter at offset 32, below the end 50"},
		"stuck":      {&fakeQueue{max: 50, failAt: -1, emptyAt: -1, stuck: true}, "does not advance"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			res, _ := readAll(c.q)
			assert.False(t, res.Complete)
			if assert.Len(t, res.Problems, 1) {
				assert.Contains(t, res.Problems[0], c.want)
			}
		})
	}
}
