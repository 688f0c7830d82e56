package rmq

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
