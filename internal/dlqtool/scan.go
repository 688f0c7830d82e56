package dlqtool

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/rmqguard/rmqguard/topics"
)

// defaultEventIDProperty is the property ScanOptions read a letter's event ID from by default, as the
// publisher's and middleware.EventID's default.
const defaultEventIDProperty = "EVENT_ID"

// ScanOptions bound a scan of a DLQ and say how to read a letter's event ID.
type ScanOptions struct {
	Filter
	// Limit is the most letters returned (≤ 0: no limit). Hitting it while letters remain unread makes the
	// result incomplete.
	Limit int
	// EventIDProperty names the property holding the business event ID; "" means defaultEventIDProperty.
	EventIDProperty string
	// EventIDJSONField, when set, names a top-level field of a JSON body read when the property is absent
	// (the example consumer's "eventId"); a leading UTF-8 byte-order mark is skipped.
	EventIDJSONField string
	// ClockSkew widens the broker's search by store time for Since and Until on both sides, since FailedAt
	// comes from the dead-lettering host's clock and the store time from the broker's; 0 means one minute.
	ClockSkew time.Duration
}

// ScanResult is what a scan found, and whether it saw the whole DLQ.
type ScanResult struct {
	// Topic is the DLQ topic read.
	Topic string
	// Brokers names each broker whose share of the topic the name servers listed, sorted. A master that is
	// down is not listed (the name server forgets it): its letters are not read, and nothing says so.
	Brokers []string
	// Letters are the selected letters, queue by queue, each queue from the oldest.
	Letters []Letter
	// Read counts the letters read, selected or not.
	Read int
	// Expired counts letters that were in a queue's range when the scan started but were removed by the
	// broker's retention before they were read; they no longer exist.
	Expired int64
	// Complete is false when some queue could not be read to its end, the limit was hit, or the context
	// ended; Problems say why, one line per cause, e.g. "queue 0 on broker-a: pull at offset 64: timeout".
	Complete bool
	// Problems describe each reason the scan is incomplete.
	Problems []string
	// LimitHit is true when the scan stopped at ScanOptions.Limit with letters left unread (Problems then ends
	// with a line saying so).
	LimitHit bool
}

// incomplete records a problem and marks the result incomplete.
func (r *ScanResult) incomplete(format string, args ...any) {
	r.Complete = false
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// Scan reads group's DLQ topic on cluster (%DLQ%<group>) with a pull consumer of its own, from each queue's
// min offset to the max offset captured at the start, and returns the letters opts selects (the package
// doc, "Scans"). Errors (nothing read): an invalid cluster or options; ErrNoDLQ (wrapped): no dead letters;
// ErrWriteOnly (wrapped, with the fix) when no queue is readable; the client or name server failing. Other
// trouble returns what was read with Complete false and a Problem per cause.
func Scan(ctx context.Context, cluster topics.Cluster, group string, opts ScanOptions) (ScanResult, error) {
	if err := cluster.Validate(); err != nil {
		return ScanResult{}, err
	}
	if err := opts.validate(); err != nil {
		return ScanResult{}, err
	}
	res := ScanResult{Complete: true}
	err := scanMessages(ctx, cluster, group, opts, &res, func(m *primitive.MessageExt) bool {
		res.Read++
		l := newLetter(group, m)
		l.EventID = opts.eventID(m)
		if opts.Filter.match(l) {
			res.Letters = append(res.Letters, l)
		}
		return opts.Limit <= 0 || len(res.Letters) < opts.Limit
	})
	return res, err
}

// validate checks the options' values.
func (o ScanOptions) validate() error {
	if o.ClockSkew < 0 {
		return fmt.Errorf("dlq: scan: ClockSkew %s is negative", o.ClockSkew)
	}
	if !o.Since.IsZero() && !o.Until.IsZero() && !o.Since.Before(o.Until) {
		return fmt.Errorf("dlq: scan: Since %s is not before Until %s", o.Since.Format(time.RFC3339), o.Until.Format(time.RFC3339))
	}
	return nil
}

// scanMessages reads the bounded ranges of topic's readable queues into visit, which returns false to stop
// (the limit); problems and the topic go to res.
func scanMessages(ctx context.Context, cluster topics.Cluster, group string, opts ScanOptions, res *ScanResult,
	visit func(*primitive.MessageExt) bool) error {
	topic := dlqTopic(cluster, group)
	res.Topic = topic
	route, err := dlqRoute(ctx, cluster, topic)
	if err != nil {
		return fmt.Errorf("dlq: scan: %w", err)
	}
	for _, q := range route {
		res.Brokers = append(res.Brokers, q.BrokerName)
	}
	sort.Strings(res.Brokers)
	bad := unreadable(route)
	if len(bad) == len(route) {
		return fmt.Errorf("dlq: scan: %w", writeOnlyError(topic, bad))
	}
	for _, q := range bad {
		res.incomplete("broker %s: perm %d, its %d queue(s) of %s cannot be read (run with --fix-perm)", q.BrokerName, q.Perm, q.ReadQueues, topic)
	}
	pc, err := newPullConsumer(cluster, topic)
	if err != nil {
		return fmt.Errorf("dlq: scan %s: %w", topic, err)
	}
	defer func() { _ = pc.Shutdown() }()
	queues, err := pc.GetTopicRouteInfo(topic)
	if err != nil {
		return fmt.Errorf("dlq: scan %s: readable queues: %w", topic, err)
	}
	spans := planSpans(ctx, pc, queues, opts, res)
	for i, s := range spans {
		if err := ctx.Err(); err != nil {
			res.incomplete("stopped before queue %d on %s: %v", s.queue.QueueId, s.queue.BrokerName, err)
			return nil
		}
		next := readSpan(ctx, pc, s, res, visit)
		if next >= 0 { // stopped by the limit
			if next < s.to || anyLeft(spans[i+1:]) {
				res.LimitHit = true
				res.incomplete("limit %d reached before the end of %s (stopped in queue %d at offset %d)", opts.Limit, topic, s.queue.QueueId, next)
			}
			return nil
		}
	}
	return nil
}

// anyLeft reports whether any span still has offsets to read.
func anyLeft(spans []span) bool {
	for _, s := range spans {
		if s.from < s.to {
			return true
		}
	}
	return false
}

// errNoProgress is a broker answer that would make a queue's read loop forever.
var errNoProgress = errors.New("the broker's next offset does not advance")
