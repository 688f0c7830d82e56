package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/retry"
)

// compensation is what the demo's compensation job did.
type compensation struct {
	// cancelled counts the orders the job cancelled; moved the ones it found already cancelled by their
	// OrderCancelled message; retries the passes repeated after a transient error (a deadlock).
	cancelled, moved, retries int
}

// send sends the plan's messages — the creating part, then, with the compensation job racing them, the
// settling part and the poison message — and waits for the job to finish.
func (r *demoRun) send(ctx context.Context) (compensation, error) {
	p, err := r.producer()
	if err != nil {
		return compensation{}, err
	}
	defer func() { _ = p.Shutdown() }()
	r.start = time.Now()
	if err := sendAll(ctx, p, r.plan.Messages[:r.plan.SettleFrom]); err != nil {
		return compensation{}, err
	}
	jobCtx, cancel := context.WithTimeout(ctx, r.o.timeout)
	defer cancel()
	type jobResult struct {
		c   compensation
		err error
	}
	done := make(chan jobResult, 1)
	go func() {
		c, err := r.compensate(jobCtx, r.plan.Cancelled)
		done <- jobResult{c, err}
	}()
	sendErr := sendAll(ctx, p, r.plan.Messages[r.plan.SettleFrom:])
	if sendErr != nil {
		cancel()
	}
	res := <-done
	if sendErr != nil {
		return res.c, sendErr
	}
	if res.err != nil {
		return res.c, fmt.Errorf("compensation job: %w", res.err)
	}
	ev := r.plan.Events
	fmt.Printf("run %s: sent %d messages to %s in %.1fs: %d distinct events (%d OrderCreated, %d OrderPaid, %d PaymentCaptured, %d OrderCancelled), "+
		"%d re-sent with new message IDs, %d failing once, %d OrderPaid before their OrderCreated, %d late OrderPaid, 1 poison; per-order queues: %v\n",
		r.o.runID, len(r.plan.Messages), r.s.topic, time.Since(r.start).Seconds(), r.plan.TotalEvents(),
		ev[shop.EventOrderCreated], ev[shop.EventOrderPaid], ev[shop.EventPaymentCaptured], ev[shop.EventOrderCancelled],
		r.plan.Duplicates, r.o.failOnce, r.plan.Early, r.plan.Late, r.o.ordered)
	fmt.Printf("compensation job: cancelled %d of %d unpaid orders itself, %d were cancelled by their OrderCancelled message first (%d passes retried)\n",
		res.c.cancelled, len(r.plan.Cancelled), res.c.moved, res.c.retries)
	return res.c, nil
}

// producer starts the demo's producer; with --ordered it picks each message's queue by the hash of its
// sharding key (the order number), so one order's events share a queue.
func (r *demoRun) producer() (rocketmq.Producer, error) {
	if !r.o.ordered {
		return rmq.StartProducer(r.nameServers, r.s.group+"-demo-producer")
	}
	group := r.s.group + "-demo-producer"
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver(r.nameServers)),
		producer.WithGroupName(group),
		producer.WithInstanceName(fmt.Sprintf("%s-%d-%d", group, os.Getpid(), time.Now().UnixNano())),
		producer.WithRetry(2),
		producer.WithQueueSelector(producer.NewHashQueueSelector()))
	if err != nil {
		return nil, fmt.Errorf("demo producer: %w", err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("demo producer: start: %w", err)
	}
	return p, nil
}

// sendAll sends msgs one by one; any send that is not SEND_OK stops it.
func sendAll(ctx context.Context, p rocketmq.Producer, msgs []*primitive.Message) error {
	for _, msg := range msgs {
		res, err := p.SendSync(ctx, msg)
		if err != nil {
			return fmt.Errorf("send %s: %w", msg.GetProperty("EVENT_ID"), err)
		}
		if res.Status != primitive.SendOK {
			return fmt.Errorf("send %s: status %d", msg.GetProperty("EVENT_ID"), res.Status)
		}
	}
	return nil
}

// compensate runs the compensation job over orders until none is pending (all created and then cancelled
// by the job or by their message), every 100 ms; a transient error (a deadlock) repeats the pass.
func (r *demoRun) compensate(ctx context.Context, orders []string) (compensation, error) {
	var c compensation
	pending := orders
	for len(pending) > 0 {
		rep, err := r.shop.CancelUnpaid(ctx, r.db, pending)
		c.cancelled += len(rep.Cancelled)
		c.moved += len(rep.Moved)
		if err != nil && retry.Classify(err) != retry.ClassTransient {
			return c, err
		}
		if err != nil {
			c.retries++
		}
		pending = without(pending, rep.Cancelled, rep.Moved)
		select {
		case <-ctx.Done():
			return c, fmt.Errorf("%d orders still pending: %w", len(pending), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return c, nil
}

// without returns the elements of all that are in none of the drop lists.
func without(all []string, drop ...[]string) []string {
	gone := map[string]bool{}
	for _, d := range drop {
		for _, x := range d {
			gone[x] = true
		}
	}
	var out []string
	for _, x := range all {
		if !gone[x] {
			out = append(out, x)
		}
	}
	return out
}
