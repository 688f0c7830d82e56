package dlqtool

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/topics"
)

// ErrWriteOnly means %DLQ%<group> exists but none of its queues is readable: brokers before 4.9.2 create
// it write-only (perm 2). FixPerm makes it readable.
var ErrWriteOnly = errors.New("dlq: the DLQ topic is write-only (perm 2)")

// ErrNoDLQ means %DLQ%<group> does not exist: the group never dead-lettered anything, since the broker
// creates the topic with the first dead letter (or topics.Ensure, or the consumer's Start, creates it in advance).
// It is not a failure: there is nothing to read.
var ErrNoDLQ = errors.New("dlq: the DLQ topic does not exist (created on the first dead letter)")

// PermFix reports what FixPerm did.
type PermFix struct {
	// Topic is the DLQ topic.
	Topic string
	// Before and After are the topic's perm before and after (After == Before when nothing changed). With
	// several brokers they are those of the first broker FixPerm changed.
	Before, After int
	// ReadQueues and WriteQueues are the queue counts, kept as they were (summed over the brokers).
	ReadQueues, WriteQueues int
	// Changed is false when the topic was readable already and nothing was sent to the broker.
	Changed bool
}

// String renders the fix as the CLI prints it, e.g. "%DLQ%G was write-only (perm 2); made readable
// (perm 6), 1 read / 1 write queues kept".
func (f PermFix) String() string {
	if !f.Changed {
		return fmt.Sprintf("%s is readable already (perm %d), %d read / %d write queues", f.Topic, f.After, f.ReadQueues, f.WriteQueues)
	}
	return fmt.Sprintf("%s was write-only (perm %d); made readable (perm %d), %d read / %d write queues kept",
		f.Topic, f.Before, f.After, f.ReadQueues, f.WriteQueues)
}

// FixPerm makes group's DLQ topic readable: on every broker where its perm lacks the read bit (4) it
// re-creates the topic with the read bit added (perm 2 becomes 6), queue counts kept, then polls the name
// server every 200 ms until the route shows it readable; a readable topic is left alone. Errors: an invalid
// cluster; ErrNoDLQ (wrapped) when the topic does not exist; a broker with no master address; the admin
// request failing; ctx ending before the new perm shows in the route (wrapping ctx.Err()).
func FixPerm(ctx context.Context, cluster topics.Cluster, group string) (PermFix, error) {
	if err := cluster.Validate(); err != nil {
		return PermFix{}, err
	}
	topic := dlqTopic(cluster, group)
	route, err := dlqRoute(ctx, cluster, topic)
	if err != nil {
		return PermFix{}, fmt.Errorf("dlq: fix perm: %w", err)
	}
	fix := PermFix{Topic: topic}
	for _, q := range route {
		fix.ReadQueues += q.ReadQueues
		fix.WriteQueues += q.WriteQueues
	}
	fix.Before, fix.After = route[0].Perm, route[0].Perm
	if err := makeReadable(ctx, cluster, topic, route, &fix); err != nil {
		return fix, err
	}
	if !fix.Changed {
		return fix, nil
	}
	return fix, waitReadable(ctx, cluster, topic)
}

// makeReadable sends the perm update to each broker whose perm lacks the read bit (rmq.MakeReadable),
// recording the first change in fix.
func makeReadable(ctx context.Context, cluster topics.Cluster, topic string, route []rmq.QueueData, fix *PermFix) error {
	changed, err := rmq.MakeReadable(ctx, topic, route, rmq.Credentials(cluster.Credentials))
	if len(changed) > 0 {
		fix.Before, fix.After, fix.Changed = changed[0].Perm, changed[0].Perm|rmq.PermRead, true
	}
	if err != nil {
		return fmt.Errorf("dlq: fix perm: %w", err)
	}
	return nil
}

// waitReadable waits until the route shows every broker's queues readable (rmq.WaitReadable).
func waitReadable(ctx context.Context, cluster topics.Cluster, topic string) error {
	if err := rmq.WaitReadable(ctx, cluster.NameServers, topic); err != nil {
		return fmt.Errorf("dlq: fix perm: %w", err)
	}
	return nil
}

// dlqRoute returns topic's route from the name server, or an error wrapping ErrNoDLQ when it has none.
func dlqRoute(ctx context.Context, cluster topics.Cluster, topic string) ([]rmq.QueueData, error) {
	route, err := rmq.TopicRoute(ctx, cluster.NameServers, topic)
	if errors.Is(err, rmq.ErrTopicNotExist) || (err == nil && len(route) == 0) {
		return nil, fmt.Errorf("%s does not exist (created on the first dead letter): %w", topic, ErrNoDLQ)
	}
	if err != nil {
		return nil, fmt.Errorf("route of %s: %w", topic, err)
	}
	return route, nil
}

// unreadable returns the brokers of route whose queues cannot be read (no read bit, or no read queue).
func unreadable(route []rmq.QueueData) []rmq.QueueData {
	var out []rmq.QueueData
	for _, q := range route {
		if !q.Readable() || q.ReadQueues == 0 {
			out = append(out, q)
		}
	}
	return out
}

// writeOnlyError describes a route with unreadable brokers: the perms and the fix.
func writeOnlyError(topic string, bad []rmq.QueueData) error {
	parts := make([]string, 0, len(bad))
	for _, q := range bad {
		parts = append(parts, fmt.Sprintf("perm %d on %s (%d read queues)", q.Perm, q.BrokerName, q.ReadQueues))
	}
	return fmt.Errorf("%s cannot be read: %s; run with --fix-perm (dlqtool.FixPerm) to make it readable (perm 6) keeping its queue counts: %w",
		topic, strings.Join(parts, ", "), ErrWriteOnly)
}
