package rmqadmin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/remoting"
)

// State says what EnsureTopicState found and did.
type State int

const (
	// Exists: the topic had a route and nothing was changed.
	Exists State = iota
	// Created: the topic had no route; it was created on the brokers and its route is visible.
	Created
	// Updated: the topic existed but a dead-letter topic was not readable on some broker (brokers before
	// 4.9.2 create %DLQ% topics write-only, perm 2); its perm was made readable, queue counts kept.
	Updated
)

// String renders "exists", "created" or "updated", as `rmqguard topic ensure` prints it.
func (s State) String() string {
	switch s {
	case Created:
		return "created"
	case Updated:
		return "updated"
	default:
		return "exists"
	}
}

// EnsureTopic is EnsureTopicState without the state: it makes sure topic exists on brokerAddr's cluster.
func EnsureTopic(ctx context.Context, nameServers []string, brokerAddr, topic string, queues int, opts ...Option) error {
	if strings.TrimSpace(brokerAddr) == "" {
		return fmt.Errorf("ensure topic %q: empty broker address", topic)
	}
	_, err := EnsureTopicState(ctx, nameServers, brokerAddr, topic, queues, opts...)
	return err
}

// EnsureTopicState makes sure topic exists with a route on the name servers, creating it when it has none,
// and reports whether it was Created, already Exists, or was Updated (a dead-letter topic made readable).
//
// nameServers are "host:port" name server addresses (at least one); brokerAddr is the "host:port" remoting
// address of the master broker that is to hold a new topic, or "" for every master broker the name servers
// list (a group's retry and DLQ topics belong on every broker its messages come from); queues is the read
// and write queue count of a new topic (≥ 1). A new topic gets perm 6 (read and write). An existing topic
// keeps its queue counts and perm, except a %DLQ% topic without the read bit, which gets it (perm 2 → 6):
// the replay tool must read it. Idempotent: a second call reports Exists.
//
// It first waits (WaitBrokerRegistered) until the name servers list the brokers, so that a broker that has
// just started is not mistaken for one without the topic, and checks the credentials on each broker (a
// signed heartbeat). After a change it polls every RoutePollInterval until the route shows it or ctx ends.
//
// Errors name the topic and, for a broker's refusal, the broker: invalid arguments; a name server or broker
// unreachable; ctx done first (wrapping ctx.Err()); ErrNoWritableQueues for an existing topic other than a
// DLQ with no writable queue; an *ACLError or *BrokerError from the broker.
//
// opts give credentials and a namespace (WithCredentials, WithNamespace): topic is then "ns%topic" (names
// already in the namespace, such as "%DLQ%ns%G", are kept).
func EnsureTopicState(ctx context.Context, nameServers []string, brokerAddr, topic string, queues int, opts ...Option) (State, error) {
	if err := validateEnsure(nameServers, topic, queues); err != nil {
		return Exists, err
	}
	acc := newAccess(opts)
	topic = acc.name(topic)
	brokers, err := targetBrokers(ctx, nameServers, brokerAddr)
	if err != nil {
		return Exists, fmt.Errorf("ensure topic %q: %w", topic, err)
	}
	if err := checkBrokers(ctx, nameServers, brokers, acc.credentials); err != nil {
		return Exists, fmt.Errorf("ensure topic %q: %w", topic, err)
	}
	route, err := TopicRoute(ctx, nameServers, topic)
	switch {
	case errors.Is(err, ErrTopicNotExist) || err == nil && len(route) == 0:
		return Created, createOn(ctx, nameServers, brokers, topic, queues, acc.credentials)
	case err != nil:
		return Exists, fmt.Errorf("ensure topic %q: %w", topic, err)
	}
	if strings.HasPrefix(topic, consumer.DLQTopicPrefix) {
		return makeReadable(ctx, nameServers, topic, route, acc.credentials)
	}
	if !anyWritable(route) {
		return Exists, fmt.Errorf("ensure topic %q: %w", topic, ErrNoWritableQueues)
	}
	return Exists, nil
}

// validateEnsure rejects missing name servers, a blank topic and a queue count below 1.
func validateEnsure(nameServers []string, topic string, queues int) error {
	if err := validateNameServers(nameServers); err != nil {
		return fmt.Errorf("ensure topic %q: %w", topic, err)
	}
	if strings.TrimSpace(topic) == "" {
		return errors.New("ensure topic: empty topic name")
	}
	if queues < 1 {
		return fmt.Errorf("ensure topic %q: queue count %d must be at least 1", topic, queues)
	}
	return nil
}

// targetBrokers returns brokerAddr alone, or with "" every master broker the name servers list.
func targetBrokers(ctx context.Context, nameServers []string, brokerAddr string) ([]string, error) {
	if strings.TrimSpace(brokerAddr) != "" {
		return []string{brokerAddr}, nil
	}
	addrs, err := remoting.MasterBrokers(ctx, nameServers)
	if err != nil {
		return nil, fmt.Errorf("find master brokers: %w", err)
	}
	return addrs, nil
}

// checkBrokers waits until each broker is registered and checks that it accepts the credentials (the name
// server has no ACL, so wrong keys fail here with an *ACLError even when the topic exists).
func checkBrokers(ctx context.Context, nameServers, brokers []string, c consumer.Credentials) error {
	for _, b := range brokers {
		// Until the broker has registered, the name server answers TOPIC_NOT_EXIST for topics the broker
		// has, and creating them again could change their perm.
		if err := WaitBrokerRegistered(ctx, nameServers, b); err != nil {
			return err
		}
		if err := CheckAccess(ctx, b, c); err != nil {
			return err
		}
	}
	return nil
}

// createOn creates topic on each broker (a signed request of our own: the client's admin.CreateTopic
// neither signs it nor reports the broker's answer), then waits for a writable route.
func createOn(ctx context.Context, nameServers, brokers []string, topic string, queues int, c consumer.Credentials) error {
	for _, b := range brokers {
		if err := createTopic(ctx, b, topic, queues, c); err != nil {
			return fmt.Errorf("ensure topic %q: create on broker %s: %w", topic, b, err)
		}
	}
	if err := waitRoute(ctx, nameServers, topic, anyWritable); err != nil {
		return fmt.Errorf("ensure topic %q: created on broker %s: %w", topic, strings.Join(brokers, ","), err)
	}
	return nil
}

// makeReadable makes the DLQ topic readable where it is not (MakeReadable) and reports Updated when it
// changed a broker, after the route shows it (WaitReadable).
func makeReadable(ctx context.Context, nameServers []string, topic string, route []QueueData, c consumer.Credentials) (State, error) {
	changed, err := MakeReadable(ctx, topic, route, c)
	if err != nil {
		return Exists, fmt.Errorf("ensure topic %q: %w", topic, err)
	}
	if len(changed) == 0 {
		return Exists, nil
	}
	if err := WaitReadable(ctx, nameServers, topic); err != nil {
		return Updated, fmt.Errorf("ensure topic %q: %w", topic, err)
	}
	return Updated, nil
}

// MakeReadable adds the read bit (PermRead) on each broker of route whose share of topic lacks it, keeping
// its read and write queue counts (UPDATE_AND_CREATE_TOPIC on the broker's master, signed with c), and
// returns those brokers' shares as they were before (none: every share was readable). It does not wait for
// the name server: see WaitReadable. Brokers before 4.9.2 create %DLQ% topics write-only (perm 2).
// Errors: a broker with no master registered; the broker's refusal (*ACLError, *BrokerError) or transport
// error, naming the topic and the broker.
func MakeReadable(ctx context.Context, topic string, route []QueueData, c consumer.Credentials) ([]QueueData, error) {
	var changed []QueueData
	for _, q := range route {
		if q.Readable() {
			continue
		}
		if q.BrokerAddr == "" {
			return changed, fmt.Errorf("make %q readable: broker %s has no master registered", topic, q.BrokerName)
		}
		t := TopicConfig{Topic: topic, ReadQueues: q.ReadQueues, WriteQueues: q.WriteQueues, Perm: q.Perm | PermRead}
		if err := UpdateTopic(ctx, q.BrokerAddr, t, c); err != nil {
			return changed, fmt.Errorf("make %q readable on broker %s (%s): %w", topic, q.BrokerName, q.BrokerAddr, err)
		}
		changed = append(changed, q)
	}
	return changed, nil
}

// WaitReadable polls the name servers every RoutePollInterval until every broker's share of topic is
// readable, or ctx ends (an error wrapping ctx.Err()).
func WaitReadable(ctx context.Context, nameServers []string, topic string) error {
	return waitRoute(ctx, nameServers, topic, allReadable)
}

// anyWritable reports whether some broker has a writable queue of the topic.
func anyWritable(route []QueueData) bool {
	for _, q := range route {
		if q.Writable() && q.WriteQueues > 0 {
			return true
		}
	}
	return false
}

// allReadable reports whether every broker's share of the topic is readable.
func allReadable(route []QueueData) bool {
	for _, q := range route {
		if !q.Readable() {
			return false
		}
	}
	return len(route) > 0
}

// waitRoute polls the name servers every RoutePollInterval until topic's route satisfies ok, or ctx ends.
func waitRoute(ctx context.Context, nameServers []string, topic string, ok func([]QueueData) bool) error {
	ticker := time.NewTicker(RoutePollInterval)
	defer ticker.Stop()
	for {
		route, err := TopicRoute(ctx, nameServers, topic)
		if err != nil && !errors.Is(err, ErrTopicNotExist) {
			return fmt.Errorf("route of %q after the change: %w", topic, err)
		}
		if err == nil && ok(route) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the change of %q is not visible on name server %v: %w", topic, nameServers, ctx.Err())
		case <-ticker.C:
		}
	}
}
