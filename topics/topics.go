package topics

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// defaultQueues is the read and write queue count of a new business topic when Topic.Queues is 0.
const defaultQueues = 4

// groupTopicQueues is the queue count of a new %RETRY% or %DLQ% topic: one queue each, as the broker
// itself creates them.
const groupTopicQueues = 1

// Cluster says how to reach the cluster (name servers, namespace, credentials) and where new topics go;
// dlq.MonitorConfig takes one too (it reads every master, whatever Brokers says).
type Cluster struct {
	// NameServers are "host:port" name server addresses. Required.
	NameServers []string
	// Brokers are the "host:port" addresses of the master brokers that are to hold the topics; none
	// (default) means every master broker the name servers list, which is what a group's retry and DLQ
	// topics need (a retried message goes back to the broker it came from).
	Brokers []string
	// Namespace is the RocketMQ namespace ("" = none): topic T is created as "ns%T", and a group's topics
	// as "%RETRY%ns%G" and "%DLQ%ns%G".
	Namespace string
	// Credentials are the ACL keys every request is signed with; the zero value means no ACL.
	Credentials consumer.Credentials
}

// Validate returns the problems of c, each naming the field: no name server, a blank one, one key without
// the other, an invalid namespace.
func (c Cluster) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("topics: cluster: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(c.NameServers) == 0 {
		bad("NameServers", "required: give at least one name server address, e.g. 127.0.0.1:9876")
	}
	for i, ns := range c.NameServers {
		if strings.TrimSpace(ns) == "" {
			bad("NameServers", "entry %d is empty", i)
		}
	}
	if (c.Credentials.AccessKey == "") != (c.Credentials.SecretKey == "") {
		bad("Credentials", "give both AccessKey and SecretKey, or neither (%s)", c.Credentials)
	}
	for i, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			bad("Brokers", "entry %d is empty", i)
		}
	}
	if err := rmq.ValidateNamespace(c.Namespace); err != nil {
		bad("Namespace", "%v", err)
	}
	return errors.Join(errs...)
}

// Topic is one topic to ensure.
type Topic struct {
	// Name is the topic as code names it, without the namespace (e.g. "ORDER", "%DLQ%inventory").
	Name string
	// Queues is the read and write queue count if the topic is created; 0 means 4. An
	// existing topic keeps its counts.
	Queues int
}

// GroupTopics returns group's retry and dead-letter topics, %RETRY%<group> and %DLQ%<group>, with
// groupTopicQueues queues each (the namespace is added by Ensure).
func GroupTopics(group string) []Topic {
	return []Topic{
		{Name: rmq.RetryTopic(group), Queues: groupTopicQueues},
		{Name: rmq.DLQTopic(group), Queues: groupTopicQueues},
	}
}

// Result is what Ensure did for one topic.
type Result struct {
	// Topic is the topic as the broker names it (namespace included).
	Topic string
	// State sums Brokers up: "created" when the topic was created on some broker, else "updated" when it was
	// made readable on some broker, else "exists".
	State string
	// Brokers say what was done on each master broker, sorted by broker name.
	Brokers []BrokerResult
}

// String renders "<topic>: created|exists|updated".
func (r Result) String() string { return r.Topic + ": " + r.State }

// BrokerResult is what Ensure did for one topic on one master broker.
type BrokerResult struct {
	// Broker is the broker name (brokerName), Addr its master's "host:port" address.
	Broker, Addr string
	// State is "created" (the broker held no queue of the topic), "exists", or "updated" (a write-only DLQ
	// made readable).
	State string
}

// String renders "<broker> (<addr>): created|exists|updated".
func (b BrokerResult) String() string { return b.Broker + " (" + b.Addr + "): " + b.State }

// Ensure makes sure each topic exists on each master broker c names (see the package comment) and returns
// one Result per topic, in order. It stops at the first failure and returns the results so far (the
// failed topic's too when some broker was done) with the error, which names the topic and, for a broker's refusal, the broker: an invalid Cluster or Topic; a
// broker named in c.Brokers that is not a master the name servers list; a name server or broker
// unreachable; ctx done first (give ctx a deadline: a new topic's route is polled every 200 ms until the
// name server shows it); a broker's ACL refusal (errors.Is consumer.ErrACL); a business topic that exists without a writable queue.
func Ensure(ctx context.Context, c Cluster, ts ...Topic) ([]Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	opts := []rmq.Option{rmq.WithCredentials(rmq.Credentials(c.Credentials)), rmq.WithNamespace(c.Namespace)}
	out := make([]Result, 0, len(ts))
	for _, t := range ts {
		queues := t.Queues
		if queues == 0 {
			queues = defaultQueues
		}
		states, err := rmq.EnsureTopicOn(ctx, c.NameServers, c.Brokers, t.Name, queues, opts...)
		if len(states) > 0 {
			r := Result{Topic: rmq.InNamespace(c.Namespace, t.Name), State: rmq.Overall(states).String()}
			for _, b := range states {
				r.Brokers = append(r.Brokers, BrokerResult{Broker: b.Broker, Addr: b.Addr, State: b.State.String()})
			}
			out = append(out, r)
		}
		if err != nil {
			return out, rmq.MarkACL(fmt.Errorf("topics: %w", err), consumer.ErrACL)
		}
	}
	return out, nil
}
