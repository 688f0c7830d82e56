package dlqtool

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/rmqguard/rmqguard/topics"
)

// errNoReadableRoute means %DLQ%<group> has no readable queue on the name server: the group never
// dead-lettered anything (the broker creates the topic on the first dead letter; then ErrNoDLQ is wrapped
// too), or the topic is write-only (perm 2, as brokers before 4.9.2 create it; then ErrWriteOnly is wrapped
// too).
var errNoReadableRoute = errors.New("dlq: no readable route for the DLQ topic (not created yet, or write-only perm 2)")

// Read returns the messages of group's DLQ topic in c (%DLQ%<ns>%<group>), queue by queue from the oldest, at
// most limit (≤ 0: no limit), with Scan's bounds: the raw form of Scan, read by a pull consumer of its own
// group, so no group's offsets move. Errors: c.Validate's; errNoReadableRoute (wrapped, with ErrNoDLQ or
// ErrWriteOnly) when the topic cannot be read; one listing the problems when a queue could not be read to its
// end; client errors, wrapped (an ACL refusal surfaces there).
func Read(ctx context.Context, c topics.Cluster, group string, limit int) ([]*primitive.MessageExt, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var out []*primitive.MessageExt
	res := ScanResult{Complete: true}
	err := scanMessages(ctx, c, group, ScanOptions{Limit: limit}, &res, func(m *primitive.MessageExt) bool {
		out = append(out, m)
		return limit <= 0 || len(out) < limit
	})
	if errors.Is(err, ErrNoDLQ) || errors.Is(err, ErrWriteOnly) {
		return nil, fmt.Errorf("read %s: %w (%w)", res.Topic, errNoReadableRoute, err)
	}
	if err != nil {
		return nil, err
	}
	problems := res.Problems
	if res.LimitHit { // at most limit is what the caller asked for; the limit's problem is the last one
		problems = problems[:len(problems)-1]
	}
	if len(problems) > 0 {
		return out, fmt.Errorf("dlq: read %s: incomplete: %s", res.Topic, strings.Join(problems, "; "))
	}
	return out, nil
}
