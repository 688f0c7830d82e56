// Package rmqadmin holds the few RocketMQ administration steps the project's tooling needs: creating a topic
// explicitly (the local broker runs with autoCreateTopicEnable=false) and probing a topic with one test send.
//
// It talks to the name server and broker over the remoting protocol of
// github.com/apache/rocketmq-client-go/v2, so it works against 4.x and 5.x brokers (no gRPC proxy needed).
package rmqadmin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	rmqerrors "github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// PermReadWrite is the topic permission EnsureTopic creates topics with: readable (4) and writable (2).
const PermReadWrite = 6

// RoutePollInterval is how often EnsureTopic asks the name server whether a new topic's route is visible.
const RoutePollInterval = 200 * time.Millisecond

// ErrNoWritableQueues is returned by EnsureTopic when the topic already has a route but no writable queue
// (for example a topic whose perm was set to read-only). EnsureTopic does not re-create such a topic, since
// CreateTopic on an existing topic would overwrite its perm and queue counts.
var ErrNoWritableQueues = errors.New("topic exists but has no writable queue")

// validateNameServers rejects an empty name server list and blank entries: a missing address is an error,
// never a silent default.
func validateNameServers(nameServers []string) error {
	if len(nameServers) == 0 {
		return errors.New("no name server address given")
	}
	for _, ns := range nameServers {
		if strings.TrimSpace(ns) == "" {
			return errors.New("empty name server address")
		}
	}
	return nil
}

// instanceName returns a client instance name unique to this process and call, because rocketmq-client-go
// shares one client per ClientID (IP@instance) and a shared client would mix up options.
func instanceName(kind string) string {
	return "rmqguard-" + kind + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// EnsureTopic makes sure topic exists with a route on the name servers, creating it when it has none.
//
// nameServers are "host:port" name server addresses (at least one); brokerAddr is the "host:port" remoting
// address of the master broker that is to hold the topic (e.g. 127.0.0.1:10911); queues is the read and write
// queue count of a newly created topic (must be ≥ 1). A new topic is created with perm 6 (read and write).
//
// EnsureTopic first waits (WaitBrokerRegistered) until the name servers list brokerAddr, so that a broker that
// has just started is not mistaken for one without the topic. The topic is then created only when the name
// server answers that it has no route (TOPIC_NOT_EXIST): an existing
// topic is left as it is, whatever its queue count or perm, because re-issuing CreateTopic could change them.
// After creating it, EnsureTopic polls every RoutePollInterval until the route is visible or ctx ends.
//
// Errors: invalid arguments; the name server or broker unreachable; ctx done before the broker registered or
// the route became visible (wrapping ctx.Err()); ErrNoWritableQueues when the existing route has no writable
// queue; with ACL on and keys that the broker refuses, the client's refusal (see ACLError).
//
// opts give credentials and a namespace (WithCredentials, WithNamespace): topic is then created as
// "ns%topic" (names already in the namespace, such as "%DLQ%ns%G", are kept).
func EnsureTopic(ctx context.Context, nameServers []string, brokerAddr, topic string, queues int, opts ...Option) error {
	if err := validateNameServers(nameServers); err != nil {
		return fmt.Errorf("ensure topic %q: %w", topic, err)
	}
	if strings.TrimSpace(topic) == "" {
		return errors.New("ensure topic: empty topic name")
	}
	if strings.TrimSpace(brokerAddr) == "" {
		return fmt.Errorf("ensure topic %q: empty broker address", topic)
	}
	if queues < 1 {
		return fmt.Errorf("ensure topic %q: queue count %d must be at least 1", topic, queues)
	}

	acc := newAccess(opts)
	topic = acc.name(topic)
	// Until the broker has registered, the name server answers TOPIC_NOT_EXIST for topics the broker has,
	// and creating them again could change their perm: wait for the registration first.
	if err := WaitBrokerRegistered(ctx, nameServers, brokerAddr); err != nil {
		return fmt.Errorf("ensure topic %q: %w", topic, err)
	}

	// The name server has no ACL; ask the broker whether it takes the credentials, so that wrong keys fail
	// here with an *ACLError even when the topic exists.
	if err := CheckAccess(ctx, brokerAddr, acc.credentials); err != nil {
		return fmt.Errorf("ensure topic %q: %w", topic, err)
	}
	adm, err := admin.NewAdmin(acc.adminOptions(nameServers)...)
	if err != nil {
		return fmt.Errorf("ensure topic %q: new admin client: %w", topic, err)
	}
	defer adm.Close()

	exists, writable, err := routeState(ctx, adm, topic)
	if err != nil {
		return fmt.Errorf("ensure topic %q: query route from name server %v: %w", topic, nameServers, err)
	}
	if exists {
		if !writable {
			return fmt.Errorf("ensure topic %q: %w", topic, ErrNoWritableQueues)
		}
		return nil
	}

	// Created with a signed request of our own: the client's admin.CreateTopic neither signs it nor reports
	// the broker's answer (see createTopic).
	if err := createTopic(ctx, brokerAddr, topic, queues, acc.credentials); err != nil {
		return fmt.Errorf("ensure topic %q: create on broker %s: %w", topic, brokerAddr, err)
	}

	ticker := time.NewTicker(RoutePollInterval)
	defer ticker.Stop()
	for {
		exists, writable, err = routeState(ctx, adm, topic)
		if err != nil {
			return fmt.Errorf("ensure topic %q: query route after create: %w", topic, err)
		}
		if exists && writable {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ensure topic %q: route not visible on name server after create on broker %s: %w",
				topic, brokerAddr, ctx.Err())
		case <-ticker.C:
		}
	}
}

// routeState asks the name server for topic's route. exists is false (and err nil) when the name server
// answers TOPIC_NOT_EXIST; writable tells whether the route has at least one writable queue.
func routeState(ctx context.Context, adm admin.Admin, topic string) (exists, writable bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, false, err
	}
	mqs, err := adm.FetchPublishMessageQueues(ctx, topic)
	if errors.Is(err, rmqerrors.ErrTopicNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return true, len(mqs) > 0, nil
}

// ErrNoRoute is returned by Probe when the name server knows no route (or no writable queue) for the topic.
var ErrNoRoute = errors.New("topic has no route on the name server (create it with EnsureTopic / rmqguard topic ensure)")

// checkRoute returns nil when the topic has a writable route, ErrNoRoute when it has none, or the error of
// the name server query.
func checkRoute(ctx context.Context, nameServers []string, topic string, acc access) error {
	adm, err := admin.NewAdmin(acc.adminOptions(nameServers)...)
	if err != nil {
		return fmt.Errorf("new admin client: %w", err)
	}
	defer adm.Close()
	exists, writable, err := routeState(ctx, adm, topic)
	if err != nil {
		return fmt.Errorf("query route from name server %v: %w", nameServers, err)
	}
	if !exists || !writable {
		return ErrNoRoute
	}
	return nil
}

// ProbeProducerGroup is the producer group Probe sends with.
const ProbeProducerGroup = "RMQGUARD_PROBE_PRODUCER"

// Probe sends one small message to topic through the name servers and checks that the broker answered SEND_OK.
// The message carries the tag "probe" and the key "rmqguard-probe-<unix nanos>".
//
// nameServers are "host:port" name server addresses (at least one). The topic must already exist (see
// EnsureTopic). The producer retries a failed send twice (the client's own retry) and is shut down before
// Probe returns. The send is bounded by ctx; without a deadline on ctx the client's default send timeout (3 s)
// applies.
//
// Errors: invalid arguments; the name server unreachable; ErrNoRoute when the topic has no route (or no
// writable queue); producer start failure; the send failed (no route, broker unreachable, …); or a
// send status other than SEND_OK; with ACL on and keys that the broker refuses, an *ACLError.
//
// opts give credentials and a namespace (WithCredentials, WithNamespace): the message goes to "ns%topic".
func Probe(ctx context.Context, nameServers []string, topic string, opts ...Option) (err error) {
	if err := validateNameServers(nameServers); err != nil {
		return fmt.Errorf("probe topic %q: %w", topic, err)
	}
	if strings.TrimSpace(topic) == "" {
		return errors.New("probe: empty topic name")
	}

	// The producer reports an unreachable name server and a missing topic alike ("route info not found"):
	// ask the name server first for a clearer error.
	acc := newAccess(opts)
	topic = acc.name(topic)
	if err := checkRoute(ctx, nameServers, topic, acc); err != nil {
		return fmt.Errorf("probe topic %q: %w", topic, err)
	}

	// The producer reports an ACL refusal as text only ("CODE: 16 …"): ask the brokers first.
	if err := CheckClusterAccess(ctx, nameServers, acc.credentials); err != nil {
		return fmt.Errorf("probe topic %q: %w", topic, err)
	}
	p, err := StartProducer(nameServers, ProbeProducerGroup, opts...)
	if err != nil {
		return fmt.Errorf("probe topic %q: %w", topic, err)
	}
	defer func() {
		if serr := p.Shutdown(); serr != nil && err == nil {
			err = fmt.Errorf("probe topic %q: shut down producer: %w", topic, serr)
		}
	}()

	msg := primitive.NewMessage(topic, []byte("rmqguard probe "+time.Now().UTC().Format(time.RFC3339Nano)))
	msg.WithTag("probe")
	msg.WithKeys([]string{"rmqguard-probe-" + strconv.FormatInt(time.Now().UnixNano(), 10)})

	res, err := p.SendSync(ctx, msg)
	if err != nil {
		return fmt.Errorf("probe topic %q: send: %w", topic, err)
	}
	if res.Status != primitive.SendOK {
		return fmt.Errorf("probe topic %q: send status %d, want SEND_OK (%s)", topic, res.Status, res.String())
	}
	return nil
}
