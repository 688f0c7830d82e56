package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// tracker counts the distinct messages of a backlog a variant has handled, and the time from the first to
// the last. A message is known by the index at the end of its event ID ("<prefix><index>"), so a
// redelivery is not counted twice and the drain is never declared done early.
type tracker struct {
	seen  []atomic.Bool
	count atomic.Int64
	first atomic.Int64 // unix nanoseconds of the first handled message; 0 = none yet
	last  atomic.Int64 // unix nanoseconds of the latest newly handled message
	done  chan struct{}
	// settle, set by a variant with work after the handler (the outbox relay), is waited for once every
	// message was handled; nil for the others.
	settle settleFunc
	// consumer, set by a variant on rmqguard's consumer, counts its decisions; nil for the others.
	consumer *consumerCounts
}

// newTracker returns a tracker of a backlog of n messages.
func newTracker(n int) *tracker {
	return &tracker{seen: make([]atomic.Bool, n), done: make(chan struct{})}
}

// handled records that the message with eventID was handled (acknowledged). Event IDs that are not the
// backlog's are ignored.
func (t *tracker) handled(eventID string) {
	i, ok := indexOf(eventID, len(t.seen))
	if !ok || t.seen[i].Swap(true) {
		return
	}
	now := time.Now().UnixNano()
	t.first.CompareAndSwap(0, now)
	t.last.Store(now)
	if t.count.Add(1) == int64(len(t.seen)) {
		close(t.done)
	}
}

// indexOf returns the number after the last '-' of eventID when it is below n.
func indexOf(eventID string, n int) (int, bool) {
	i, err := strconv.Atoi(eventID[strings.LastIndexByte(eventID, '-')+1:])
	if err != nil || i < 0 || i >= n {
		return 0, false
	}
	return i, true
}

// errStalled means no new message was handled for the stall timeout: the drain is abandoned.
var errStalled = errors.New("no progress")

// wait blocks until every message was handled, ctx ends, or stall passes without a new message. It returns
// the handled count and the time from the first to the last handled message.
func (t *tracker) wait(ctx context.Context, stall time.Duration) (int, time.Duration, error) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastCount, lastChange := int64(-1), time.Now()
	for {
		select {
		case <-t.done:
			return t.result(), time.Duration(t.last.Load() - t.first.Load()), nil
		case <-ctx.Done():
			return t.result(), 0, ctx.Err()
		case now := <-tick.C:
			if c := t.count.Load(); c != lastCount {
				lastCount, lastChange = c, now
			} else if now.Sub(lastChange) > stall {
				return int(c), 0, fmt.Errorf("drain: %d of %d messages after %s: %w", c, len(t.seen), stall, errStalled)
			}
		}
	}
}

func (t *tracker) result() int { return int(t.count.Load()) }
