package rmq

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
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

// EnsureTopic is EnsureTopicState without the state: it makes sure topic exists on the master brokerAddr.
func EnsureTopic(ctx context.Context, nameServers []string, brokerAddr, topic string, queues int, opts ...Option) error {
	if strings.TrimSpace(brokerAddr) == "" {
		return fmt.Errorf("ensure topic %q: empty broker address", topic)
	}
	_, err := EnsureTopicState(ctx, nameServers, brokerAddr, topic, queues, opts...)
	return err
}

// EnsureTopicState is EnsureTopicOn for the master brokerAddr ("" = every master the name servers list),
// summed up in one State (Overall).
func EnsureTopicState(ctx context.Context, nameServers []string, brokerAddr, topic string, queues int, opts ...Option) (State, error) {
	var brokers []string
	if strings.TrimSpace(brokerAddr) != "" {
		brokers = []string{brokerAddr}
	}
	res, err := EnsureTopicOn(ctx, nameServers, brokers, topic, queues, opts...)
	return Overall(res), err
}

// BrokerState is what EnsureTopicOn found and did on one master broker.
type BrokerState struct {
	// Broker is the broker name (brokerName), Addr its master's "host:port" remoting address.
	Broker, Addr string
	// State is Created (the broker held no queue of the topic), Exists, or Updated (a %DLQ% topic made
	// readable there).
	State State
}

// Overall sums per-broker states up: Created when one is Created, else Updated when one is Updated, else Exists.
func Overall(res []BrokerState) State {
	st := Exists
	for _, r := range res {
		if r.State == Created {
			return Created
		}
		if r.State == Updated {
			st = Updated
		}
	}
	return st
}

// EnsureTopicOn makes sure topic has queues on each master broker in brokerAddrs ("host:port" remoting
// addresses of masters), or with none on every master broker the name servers list (all their clusters),
// and reports per broker, sorted by broker name, whether the topic was Created there, already Exists there,
// or was Updated (a dead-letter topic made readable). A topic lives on each master separately: one that
// exists on one master is still created on another that lacks it.
//
// nameServers are "host:port" name server addresses (at least one); queues is the read and write queue
// count of the topic where it is created (≥ 1), with perm 6 (read and write). Where the topic exists it keeps
// its queue counts and perm, except a %DLQ% topic without the read bit, which gets it (perm 2 → 6): the
// replay tool must read it. Idempotent: a second call reports Exists on every broker.
//
// It first waits (WaitBrokerRegistered) until the name servers list each named broker, so that a broker that
// has just started is not mistaken for one without the topic, and checks the credentials on each broker (a
// signed heartbeat). After a change it polls every RoutePollInterval until the route shows it or ctx ends.
//
// Errors name the topic and, for a broker's refusal, the broker, and come with the results of the brokers
// done before: invalid arguments; a named address that is not a master the name servers list; a name
// server or broker unreachable; ctx done first (wrapping ctx.Err()); ErrNoWritableQueues for an existing
// topic other than a DLQ with no writable queue on any broker; an *ACLError or *BrokerError from a broker.
//
// opts give credentials and a namespace (WithCredentials, WithNamespace): topic is then "ns%topic" (names
// already in the namespace, such as "%DLQ%ns%G", are kept).
func EnsureTopicOn(ctx context.Context, nameServers, brokerAddrs []string, topic string, queues int, opts ...Option) ([]BrokerState, error) {
	if err := validateEnsure(nameServers, topic, queues); err != nil {
		return nil, err
	}
	acc := newAccess(opts)
	topic = acc.name(topic)
	targets, err := targetMasters(ctx, nameServers, brokerAddrs)
	if err != nil {
		return nil, fmt.Errorf("ensure topic %q: %w", topic, err)
	}
	for _, m := range targets {
		if err := CheckAccess(ctx, m.Addr, acc.credentials); err != nil {
			return nil, fmt.Errorf("ensure topic %q: %w", topic, err)
		}
	}
	route, err := TopicRoute(ctx, nameServers, topic)
	if err != nil && !errors.Is(err, ErrTopicNotExist) {
		return nil, fmt.Errorf("ensure topic %q: %w", topic, err)
	}
	isDLQ := strings.HasPrefix(topic, DLQTopicPrefix)
	if !isDLQ && len(route) > 0 && !anyWritable(route) {
		return nil, fmt.Errorf("ensure topic %q: %w", topic, ErrNoWritableQueues)
	}
	shares := byBroker(route)
	out := make([]BrokerState, 0, len(targets))
	for _, m := range targets {
		st, err := ensureOn(ctx, m, shares, isDLQ, topic, queues, acc.credentials)
		if err != nil {
			return out, fmt.Errorf("ensure topic %q: %w", topic, err)
		}
		out = append(out, BrokerState{Broker: m.Name, Addr: m.Addr, State: st})
	}
	if Overall(out) == Exists {
		return out, nil
	}
	if err := waitRoute(ctx, nameServers, topic, changesVisible(out)); err != nil {
		return out, fmt.Errorf("ensure topic %q: %w", topic, err)
	}
	return out, nil
}

// byBroker indexes a route's shares by broker name.
func byBroker(route []QueueData) map[string]QueueData {
	shares := make(map[string]QueueData, len(route))
	for _, q := range route {
		shares[q.BrokerName] = q
	}
	return shares
}

// ensureOn creates topic on master m when m holds no share of it (shares, by broker name), or makes a
// %DLQ% share readable, and returns what it did.
func ensureOn(ctx context.Context, m Master, shares map[string]QueueData, isDLQ bool, topic string, queues int, c Credentials) (State, error) {
	q, ok := shares[m.Name]
	switch {
	case !ok:
		if err := createTopic(ctx, m.Addr, topic, queues, c); err != nil {
			return Exists, fmt.Errorf("create on broker %s (%s): %w", m.Name, m.Addr, err)
		}
		return Created, nil
	case isDLQ && !q.Readable():
		q.BrokerAddr = m.Addr
		if _, err := MakeReadable(ctx, topic, []QueueData{q}, c); err != nil {
			return Exists, err
		}
		return Updated, nil
	}
	return Exists, nil
}

// changesVisible is the route condition after EnsureTopicOn's changes: every broker where the topic was
// created holds a writable share, and every updated broker a readable one.
func changesVisible(res []BrokerState) func([]QueueData) bool {
	return func(route []QueueData) bool {
		shares := byBroker(route)
		for _, r := range res {
			q, ok := shares[r.Broker]
			switch {
			case r.State == Created && (!ok || !q.Writable() || q.WriteQueues == 0):
				return false
			case r.State == Updated && (!ok || !q.Readable()):
				return false
			}
		}
		return true
	}
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

// targetMasters returns the masters whose addresses are brokerAddrs, sorted by name, once the name servers
// list each (WaitBrokerRegistered: until a broker has registered, the name server answers TOPIC_NOT_EXIST for
// topics it has, and creating them again could change their perm); with none, every master they list.
func targetMasters(ctx context.Context, nameServers, brokerAddrs []string) ([]Master, error) {
	for _, b := range brokerAddrs {
		if strings.TrimSpace(b) == "" {
			return nil, errors.New("empty broker address")
		}
		if err := WaitBrokerRegistered(ctx, nameServers, b); err != nil {
			return nil, err
		}
	}
	masters, err := Masters(ctx, nameServers)
	if err != nil || len(brokerAddrs) == 0 {
		return masters, err
	}
	byAddr := map[string]Master{}
	for _, m := range masters {
		byAddr[m.Addr] = m
	}
	var out []Master
	seen := map[string]bool{}
	for _, b := range brokerAddrs {
		m, ok := byAddr[b]
		if !ok {
			return nil, fmt.Errorf("broker %s is not a master the name servers %v list (masters: %v)", b, nameServers, masters)
		}
		if !seen[m.Name] {
			seen[m.Name] = true
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// MakeReadable adds the read bit (PermRead) on each broker of route whose share of topic lacks it, keeping
// its read and write queue counts (UPDATE_AND_CREATE_TOPIC on the broker's master, signed with c), and
// returns those brokers' shares as they were before (none: every share was readable). It does not wait for
// the name server: see WaitReadable. Brokers before 4.9.2 create %DLQ% topics write-only (perm 2).
// Errors: a broker with no master registered; the broker's refusal (*ACLError, *BrokerError) or transport
// error, naming the topic and the broker.
func MakeReadable(ctx context.Context, topic string, route []QueueData, c Credentials) ([]QueueData, error) {
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
