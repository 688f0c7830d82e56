package outbox

import (
	"context"
	"hash/fnv"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// Batching: the messages of a round that go to one queue of one topic go in one SendSync (a RocketMQ
// batch: one request, one write on the broker), in id order, so a key's rows keep their order in the
// queue. The queue of a row is the one the client's hash selector would pick for its sharding key, from
// the same list of queues; the relay's own selector (queueSelector) sends a batch to the queue the relay
// chose, which a batch cannot carry otherwise (the client copies only Topic and Queue to it).
const (
	// maxBatchBytes bounds the bodies and properties of one batch, far below the broker's default
	// maxMessageSize (4 MiB), which it applies to a batch as a whole.
	maxBatchBytes = 1 << 20
	// maxMessageSize is the largest body the relay sends, the Java client's and the broker's default
	// (DefaultMQProducer.maxMessageSize): a row with a larger body is parked without a send, as the Java
	// client refuses it before sending. The Go client has no such check.
	maxMessageSize = 4 << 20
	// routeTTL is how long the relay uses a topic's queue list before it asks the name servers again
	// (the client refreshes its routes every 30 s too).
	routeTTL = 30 * time.Second
	// routeRetry is how long the relay goes on with what it knows (the last route, or none: each message
	// alone) after a failed route lookup before it asks again.
	routeRetry = 5 * time.Second
)

// router gives the queues a topic's messages may go to, in the order the client's selectors see them.
type router interface {
	queues(ctx context.Context, topic string) ([]*primitive.MessageQueue, error)
	// forget drops what it knows of topic: a send to it failed.
	forget(topic string)
}

// routes is the router of a relay with a broker: topic routes from the name servers, kept routeTTL.
type routes struct {
	nameServers []string
	namespace   string // the topics' namespace (Config.Namespace)
	mu          sync.Mutex
	known       map[string]knownRoute
}

type knownRoute struct {
	qs []*primitive.MessageQueue
	at time.Time
}

func newRoutes(nameServers []string, namespace string) *routes {
	return &routes{nameServers: nameServers, namespace: namespace, known: map[string]knownRoute{}}
}

// queues returns the writable queues of topic on brokers with a master, sorted by broker name then
// queue id (the client's list: internal routeData2PublishInfo). A failed lookup returns the last list
// known (nil if none) and the error, and is not tried again for routeRetry.
func (r *routes) queues(ctx context.Context, topic string) ([]*primitive.MessageQueue, error) {
	r.mu.Lock()
	k, ok := r.known[topic]
	r.mu.Unlock()
	if ok && time.Since(k.at) < routeTTL {
		return k.qs, nil
	}
	route, err := rmq.TopicRoute(ctx, r.nameServers, rmq.InNamespace(r.namespace, topic))
	if err != nil {
		r.mu.Lock()
		r.known[topic] = knownRoute{qs: k.qs, at: time.Now().Add(routeRetry - routeTTL)}
		r.mu.Unlock()
		return k.qs, err
	}
	var qs []*primitive.MessageQueue
	for _, qd := range route {
		if !qd.Writable() || qd.BrokerAddr == "" {
			continue
		}
		for i := range qd.WriteQueues {
			qs = append(qs, &primitive.MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueId: i})
		}
	}
	r.mu.Lock()
	r.known[topic] = knownRoute{qs: qs, at: time.Now()}
	r.mu.Unlock()
	return qs, nil
}

func (r *routes) forget(topic string) {
	r.mu.Lock()
	delete(r.known, topic)
	r.mu.Unlock()
}

// queueOf is the queue of qs the client's hash selector picks for key (FNV-1a, modulo the count).
func queueOf(key string, qs []*primitive.MessageQueue) *primitive.MessageQueue {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	i := int(h.Sum32()) % len(qs)
	if i < 0 {
		i = -i
	}
	return qs[i]
}

// queueSelector sends a message to its Queue when the relay chose one and the client's route has it,
// else by its sharding key (the client's hash selector). A batch whose queue the client's route does
// not have is not sent (no queue: the send fails, and the relay asks for the route again).
type queueSelector struct{ hash producer.QueueSelector }

func newQueueSelector() queueSelector { return queueSelector{hash: producer.NewHashQueueSelector()} }

func (s queueSelector) Select(m *primitive.Message, mqs []*primitive.MessageQueue, last string) *primitive.MessageQueue {
	if m.Queue != nil {
		for _, q := range mqs {
			if q.BrokerName == m.Queue.BrokerName && q.QueueId == m.Queue.QueueId {
				return q
			}
		}
		if m.Batch {
			return nil
		}
	}
	return s.hash.Select(m, mqs, last)
}

// unit is what one attempt covers: one effect row, or the message rows (indexes into the round's rows,
// id order) that go in one SendSync to queue (nil: the client picks by sharding key).
type unit struct {
	rows  []int
	queue *primitive.MessageQueue
}

// plan splits a round's rows into units: each effect alone; messages grouped by the queue of their
// sharding key, in id order, up to maxBatchBytes a batch; a message of a topic whose queues are not
// known (no router, lookup failed) alone, its queue chosen by the client as before.
func plan(ctx context.Context, rt router, rows []row) []unit {
	var units []unit
	type open struct {
		unit  int // index in units
		bytes int
	}
	batches := map[*primitive.MessageQueue]*open{}
	routeOf := map[string][]*primitive.MessageQueue{}
	for i, r := range rows {
		if r.Kind != outboxsql.KindMessage || rt == nil {
			units = append(units, unit{rows: []int{i}})
			continue
		}
		qs, ok := routeOf[r.Topic]
		if !ok {
			qs, _ = rt.queues(ctx, r.Topic)
			routeOf[r.Topic] = qs
		}
		if len(qs) == 0 {
			units = append(units, unit{rows: []int{i}})
			continue
		}
		q := queueOf(r.ShardingKey, qs)
		size := len(r.Body) + len(r.Properties.String) + len(r.Keys) + len(r.EventID) + len(r.Tag) + 200
		if b := batches[q]; b != nil && b.bytes+size <= maxBatchBytes {
			units[b.unit].rows = append(units[b.unit].rows, i)
			b.bytes += size
			continue
		}
		batches[q] = &open{unit: len(units), bytes: size}
		units = append(units, unit{rows: []int{i}, queue: q})
	}
	return units
}
