package chaos

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// Producer is the part of a RocketMQ producer the load uses; rocketmq.Producer satisfies it.
type Producer interface {
	SendSync(ctx context.Context, msgs ...*primitive.Message) (*primitive.SendResult, error)
}

// Load sends a scenario's messages at a steady rate.
type Load struct {
	// Rate is messages per second, > 0. Message i is due at start + i/Rate; a send that is late (the broker
	// was away) goes out at once, so the schedule catches up.
	Rate float64
	// RetryEvery is the pause before a failed send is tried again (default 500 ms).
	RetryEvery time.Duration

	sent    atomic.Int64
	retries atomic.Int64
}

// Send sends msgs in order. A send that fails (error or a status other than SEND_OK) is retried until it
// succeeds or ctx ends: the load must deliver every event, whatever the broker goes through. A failed send
// may still have been stored; its retry is then a duplicate with the same EVENT_ID, as a producer's own
// retry would be, which the consumer must absorb. Errors: ctx's, wrapped with the message's EVENT_ID.
func (l *Load) Send(ctx context.Context, p Producer, msgs []*primitive.Message) error {
	if l.Rate <= 0 {
		return fmt.Errorf("load: Rate %g: must be > 0", l.Rate)
	}
	retryEvery := l.RetryEvery
	if retryEvery <= 0 {
		retryEvery = 500 * time.Millisecond
	}
	start := time.Now()
	for i, msg := range msgs {
		due := start.Add(time.Duration(float64(i) / l.Rate * float64(time.Second)))
		if err := sleep(ctx, time.Until(due)); err != nil {
			return fmt.Errorf("load: %s: %w", msg.GetProperty("EVENT_ID"), err)
		}
		for !sendOK(ctx, p, msg) {
			l.retries.Add(1)
			if err := sleep(ctx, retryEvery); err != nil {
				return fmt.Errorf("load: %s: %w", msg.GetProperty("EVENT_ID"), err)
			}
		}
		l.sent.Add(1)
	}
	return nil
}

// Sent is the number of messages sent so far.
func (l *Load) Sent() int { return int(l.sent.Load()) }

// Retries is the number of sends that failed and were tried again.
func (l *Load) Retries() int { return int(l.retries.Load()) }

func sendOK(ctx context.Context, p Producer, msg *primitive.Message) bool {
	res, err := p.SendSync(ctx, msg)
	return err == nil && res != nil && res.Status == primitive.SendOK
}

// sleep waits d (nothing when d ≤ 0) or until ctx ends, whose error it returns.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
