package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"golang.org/x/sync/errgroup"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// Backlog shape: the topic's queue count, messages per batch send, and concurrent senders.
const (
	backlogQueues = 4
	sendBatch     = 64
	senders       = 4
	// sendAttempts and sendRetryPause bound the retries of a failed batch send.
	sendAttempts   = 10
	sendRetryPause = 300 * time.Millisecond
)

// backlog is a topic of the run holding n messages whose event IDs are prefix + index: OrderCreated-like
// ones (orderMessage), or those message builds.
type backlog struct {
	topic  string
	prefix string
	n      int
	// message builds message i with event ID id for topic; nil: orderMessage.
	message func(topic, id string, i int) *primitive.Message
}

// orderBody is an OrderCreated-like JSON body of message i (about 250 bytes, like the example's events).
func orderBody(eventID string, i int) []byte {
	return []byte(`{"eventId":"` + eventID + `","eventType":"OrderCreated","orderNo":"O-` + eventID +
		`","userId":` + strconv.Itoa(1000+i%997) + `,"amount":"` + strconv.Itoa(10+i%90) + `.50","currency":"CNY",` +
		`"items":[{"sku":"SKU-` + strconv.Itoa(i%50) + `","qty":1,"price":"` + strconv.Itoa(10+i%90) + `.50"}]}`)
}

// orderMessage is OrderCreated message i with event ID id (EVENT_ID, EVENT_TYPE and AGGREGATE_ID
// properties, tag OrderCreated, key the order number, body orderBody).
func orderMessage(topic, id string, i int) *primitive.Message {
	m := primitive.NewMessage(topic, orderBody(id, i))
	m.WithTag("OrderCreated")
	m.WithKeys([]string{"O-" + id})
	m.WithProperty("EVENT_ID", id)
	m.WithProperty("EVENT_TYPE", "OrderCreated")
	m.WithProperty("AGGREGATE_ID", "O-"+id)
	return m
}

// produce creates b's topic with backlogQueues queues and sends its n messages in batches, requiring
// SEND_OK.
func (b backlog) produce(ctx context.Context, env *environment) error {
	if err := rmq.EnsureTopic(ctx, env.nameServers, env.broker, b.topic, backlogQueues); err != nil {
		return err
	}
	env.cleanup.topic(b.topic)
	g, gctx := errgroup.WithContext(ctx)
	for s := range senders {
		g.Go(func() error {
			for start := s * sendBatch; start < b.n; start += senders * sendBatch {
				if err := b.sendBatch(gctx, env.producer, start, min(start+sendBatch, b.n)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("backlog %s: %w", b.topic, err)
	}
	return nil
}

// sendBatch sends messages [from, to) in one batch.
func (b backlog) sendBatch(ctx context.Context, p rocketmq.Producer, from, to int) error {
	message := b.message
	if message == nil {
		message = orderMessage
	}
	msgs := make([]*primitive.Message, 0, to-from)
	for i := from; i < to; i++ {
		msgs = append(msgs, message(b.topic, b.prefix+strconv.Itoa(i), i))
	}
	var res *primitive.SendResult
	var err error
	// A producer that asked for the route before the topic existed answers "route info not found" for a
	// moment after it is created: retry a few times.
	for attempt := 1; ; attempt++ {
		if res, err = p.SendSync(ctx, msgs...); err == nil || attempt == sendAttempts || ctx.Err() != nil {
			break
		}
		time.Sleep(sendRetryPause)
	}
	if err != nil {
		return fmt.Errorf("send %d..%d: %w", from, to-1, err)
	}
	if res.Status != primitive.SendOK {
		return fmt.Errorf("send %d..%d: status %v", from, to-1, res.Status)
	}
	return nil
}
