package dlqtool

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// pullBatch is how many messages one pull asks for.
const pullBatch = 32

// probeOffset is an offset beyond any queue's end: a pull there is answered at once (OFFSET_MOVED) with the
// queue's min and max offsets and no long-poll, also on an empty queue.
const probeOffset = int64(1) << 50

// defaultClockSkew is ScanOptions.ClockSkew's default.
const defaultClockSkew = time.Minute

// puller is the part of the client's pull consumer a scan uses (a small interface, so the per-queue
// logic can be unit-tested with a fake).
type puller interface {
	PullFrom(ctx context.Context, queue *primitive.MessageQueue, offset int64, numbers int) (*primitive.PullResult, error)
	OffsetForTimestamp(queue *primitive.MessageQueue, timestamp int64) (int64, error)
}

// span is the offset range [from, to) of one queue a scan reads.
type span struct {
	queue    *primitive.MessageQueue
	from, to int64
}

// planSpans captures every queue's bounds before anything is read, narrowed by the options' time bounds. A queue
// whose bounds cannot be read is left out and recorded in res.
func planSpans(ctx context.Context, pc puller, queues []*primitive.MessageQueue, opts ScanOptions, res *ScanResult) []span {
	skew := opts.ClockSkew
	if skew == 0 {
		skew = defaultClockSkew
	}
	spans := make([]span, 0, len(queues))
	for _, q := range queues {
		minOff, maxOff, err := queueBounds(ctx, pc, q)
		if err != nil {
			res.incomplete("queue %d on %s: offsets: %v", q.QueueId, q.BrokerName, err)
			continue
		}
		s := span{queue: q, from: minOff, to: maxOff}
		if !opts.Since.IsZero() {
			s.from = max(s.from, searchOffset(pc, q, opts.Since.Add(-skew), minOff))
		}
		if !opts.Until.IsZero() {
			s.to = min(s.to, untilOffset(ctx, pc, q, opts.Until.Add(skew), maxOff))
		}
		spans = append(spans, s)
	}
	return spans
}

// queueBounds returns q's min and max offsets (max = the offset the next letter will get).
func queueBounds(ctx context.Context, pc puller, q *primitive.MessageQueue) (minOff, maxOff int64, err error) {
	qc := *q // the client rewrites the queue's topic with the namespace
	res, err := pc.PullFrom(ctx, &qc, probeOffset, 1)
	if err != nil {
		return 0, 0, fmt.Errorf("probe pull: %w", err)
	}
	if res.Status != primitive.PullOffsetIllegal || res.MaxOffset < res.MinOffset {
		return 0, 0, fmt.Errorf("probe pull: unexpected answer (status %d, min %d, max %d)", res.Status, res.MinOffset, res.MaxOffset)
	}
	return res.MinOffset, res.MaxOffset, nil
}

// searchOffset asks the broker for the first offset of q stored at or after t; on an error it returns
// fallback (the scan then reads more and filters by time).
func searchOffset(pc puller, q *primitive.MessageQueue, t time.Time, fallback int64) int64 {
	qc := *q
	off, err := pc.OffsetForTimestamp(&qc, t.UnixMilli())
	if err != nil || off < 0 {
		return fallback
	}
	return off
}

// untilOffset returns the exclusive end offset of q for letters stored before t. Brokers 5.x answer the
// search with the first offset stored at or after t; 4.x brokers answer the offset stored CLOSEST to t, which
// may be the last letter before t. So the letter at the answered offset is looked at: stored before t, it is
// included. On any error it returns maxOff (the scan then reads more and filters by time).
func untilOffset(ctx context.Context, pc puller, q *primitive.MessageQueue, t time.Time, maxOff int64) int64 {
	off := searchOffset(pc, q, t, maxOff)
	if off >= maxOff {
		return maxOff
	}
	qc := *q
	pr, err := pc.PullFrom(ctx, &qc, off, 1)
	if err != nil || pr.Status != primitive.PullFound {
		return maxOff
	}
	for _, m := range pr.GetMessageExts() {
		if m.QueueOffset == off && m.StoreTimestamp < t.UnixMilli() {
			return off + 1
		}
	}
	return off
}

// readSpan pulls s's messages in order into visit. It returns -1 when the span was read to its end or given
// up (a problem recorded in res), or the offset after the message at which visit asked to stop.
func readSpan(ctx context.Context, pc puller, s span, res *ScanResult, visit func(*primitive.MessageExt) bool) int64 {
	where := func() string { return fmt.Sprintf("queue %d on %s", s.queue.QueueId, s.queue.BrokerName) }
	offset := s.from
	for offset < s.to {
		if err := ctx.Err(); err != nil {
			res.incomplete("%s: stopped at offset %d of %d: %v", where(), offset, s.to, err)
			return -1
		}
		qc := *s.queue
		pr, err := pc.PullFrom(ctx, &qc, offset, int(min(pullBatch, s.to-offset)))
		if err != nil {
			res.incomplete("%s: pull at offset %d: %v", where(), offset, err)
			return -1
		}
		next := pr.NextBeginOffset
		switch pr.Status {
		case primitive.PullFound:
			for _, m := range pr.GetMessageExts() {
				if m.QueueOffset < offset || m.QueueOffset >= s.to {
					continue
				}
				if !visit(m) {
					return m.QueueOffset + 1
				}
			}
		case primitive.PullOffsetIllegal: // below the min offset now: those letters expired meanwhile
			if next > offset {
				res.Expired += min(next, s.to) - offset
			}
		case primitive.PullNoMsgMatched:
		default:
			res.incomplete("%s: the broker has no letter at offset %d, below the end %d captured at the start", where(), offset, s.to)
			return -1
		}
		if next <= offset {
			res.incomplete("%s: at offset %d: %v", where(), offset, errNoProgress)
			return -1
		}
		offset = next
	}
	return -1
}
