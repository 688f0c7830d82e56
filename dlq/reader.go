package dlq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// ErrNoReadableRoute means %DLQ%<group> has no readable queue on the name server: the group never
// dead-lettered anything (the broker creates the topic on the first dead letter), or the topic is
// write-only (perm 2, as brokers before 4.9.2 create it).
var ErrNoReadableRoute = errors.New("dlq: no readable route for the DLQ topic (not created yet, or write-only perm 2)")

// pullBatch is how many messages one pull asks for.
const pullBatch = 32

// Read returns the messages on %DLQ%<group>, queue by queue from the oldest, at most limit in all
// (limit ≤ 0 means no limit). It is ReadCluster on a cluster without namespace or ACL.
func Read(ctx context.Context, nameServers []string, group string, limit int) ([]*primitive.MessageExt, error) {
	return ReadCluster(ctx, Cluster{NameServers: nameServers}, group, limit)
}

// ReadCluster returns the messages on the DLQ topic of group (given without namespace) in cluster c
// (c.DLQTopic: %DLQ%<group>, or %DLQ%<ns>%<group>), queue by queue from the oldest, at most limit in all
// (limit ≤ 0 means no limit). It reads with a pull consumer of its own group (in c's namespace, with c's
// credentials), so no consumer group's offsets move. Reading an empty queue costs one broker long-poll
// (up to 20 s). Errors: c.Validate's; ErrNoReadableRoute (wrapped) when the topic cannot be read; client
// and pull errors wrapped (an ACL refusal surfaces there, see the client's error).
func ReadCluster(ctx context.Context, c Cluster, group string, limit int) ([]*primitive.MessageExt, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	topic := c.DLQTopic(group)
	suffix := strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	pc, err := rocketmq.NewPullConsumer(append(c.PullConsumerOptions("rmqguard-dlq-reader-"+suffix),
		rmq.WithInstance("rmqguard-dlq-reader-"+suffix))...)
	if err != nil {
		return nil, fmt.Errorf("dlq: read %s: new pull consumer: %w", topic, err)
	}
	if err := pc.Subscribe(topic, rmq.MessageSelector{Type: rmq.TAG, Expression: "*"}); err != nil {
		return nil, fmt.Errorf("dlq: read %s: subscribe: %w", topic, err)
	}
	if err := pc.Start(); err != nil {
		return nil, fmt.Errorf("dlq: read %s: start pull consumer: %w", topic, err)
	}
	defer func() { _ = pc.Shutdown() }()

	queues, err := pc.GetTopicRouteInfo(topic)
	if errors.Is(err, rmqerrors.ErrRouteNotFound) || (err == nil && len(queues) == 0) {
		return nil, fmt.Errorf("read %s: %w", topic, ErrNoReadableRoute)
	}
	if err != nil {
		return nil, fmt.Errorf("dlq: read %s: route: %w", topic, err)
	}
	var out []*primitive.MessageExt
	for _, q := range queues {
		msgs, err := readQueue(ctx, pc, q, limit-len(out))
		out = append(out, msgs...)
		if err != nil {
			return out, fmt.Errorf("dlq: read %s queue %d: %w", topic, q.QueueId, err)
		}
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	return out, nil
}

func readQueue(ctx context.Context, pc rocketmq.PullConsumer, q *primitive.MessageQueue, limit int) ([]*primitive.MessageExt, error) {
	var out []*primitive.MessageExt
	offset := int64(0)
	for {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		res, err := pc.PullFrom(ctx, q, offset, pullBatch)
		if err != nil {
			return out, err
		}
		switch res.Status {
		case primitive.PullFound:
			out = append(out, res.GetMessageExts()...)
			if limit > 0 && len(out) >= limit {
				return out[:limit], nil
			}
		case primitive.PullOffsetIllegal:
			if res.NextBeginOffset <= offset {
				return out, nil
			}
		default: // no new message, or none matched
			return out, nil
		}
		if res.NextBeginOffset <= offset {
			return out, nil
		}
		offset = res.NextBeginOffset
		// Stop at the end instead of issuing a pull the broker would long-poll.
		if offset >= res.MaxOffset {
			return out, nil
		}
	}
}
