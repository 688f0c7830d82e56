package dlq

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/topics"
)

// defaultPublisherSendRetries is the producer's own retries of a failed send (the client's WithRetry)
// when PublisherConfig.SendRetries is 0.
const defaultPublisherSendRetries = 2

// publisherProducerGroupSuffix is appended to PublisherConfig.Group to name the producer group of
// StartPublisher's producer: "<Group>-rmqguard-dlq", as the consumer's own dead-letter producer.
const publisherProducerGroupSuffix = "-rmqguard-dlq"

// PublisherConfig is what StartPublisher needs to build a producer of its own.
type PublisherConfig struct {
	// NameServers are "host:port" name server addresses. Required.
	NameServers []string
	// Group is the consumer group whose dead letters the publisher sends (Config.Group of the consumer,
	// without namespace). Required. The producer group is Group + publisherProducerGroupSuffix.
	Group string
	// Namespace is the consumer's Config.Namespace ("" = none); the producer group is put into it. The
	// letters' topic comes from each Delivery (%DLQ%<ns>%<group>).
	Namespace string
	// Credentials are the ACL keys (both or neither); the zero value means no ACL.
	Credentials consumer.Credentials
	// InstanceName is the producer's client instance name. Default "rmqguard-dlq-<pid>-<unix nanos>":
	// the client shares one client per ClientID (IP@instance), so it must differ from every other client.
	InstanceName string
	// SendRetries is the client's own retries of a failed send. Default defaultPublisherSendRetries (2);
	// -1 means none; at most 16.
	SendRetries int
}

// PublisherConfigError is an invalid PublisherConfig field; StartPublisher returns them joined.
type PublisherConfigError struct {
	// Field is the PublisherConfig field, e.g. "NameServers"; Problem says what is wrong with it.
	Field, Problem string
}

// Error renders "dlq publisher config: <Field>: <Problem>".
func (e *PublisherConfigError) Error() string {
	return "dlq publisher config: " + e.Field + ": " + e.Problem
}

// validate returns every problem of c, each a *PublisherConfigError naming the field.
func (c PublisherConfig) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &PublisherConfigError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if len(c.NameServers) == 0 {
		bad("NameServers", "required: give at least one name server address, e.g. 127.0.0.1:9876")
	}
	for i, ns := range c.NameServers {
		if strings.TrimSpace(ns) == "" || !strings.Contains(ns, ":") {
			bad("NameServers", "entry %d %q is not host:port", i, ns)
		}
	}
	if strings.TrimSpace(c.Group) == "" {
		bad("Group", "required: the consumer group whose dead letters are published")
	}
	if err := rmq.ValidateNamespace(c.Namespace); err != nil {
		bad("Namespace", "%v", err)
	}
	if (c.Credentials.AccessKey == "") != (c.Credentials.SecretKey == "") {
		bad("Credentials", "give both AccessKey and SecretKey, or neither (%s)", c.Credentials)
	}
	if c.SendRetries < -1 || c.SendRetries > 16 {
		bad("SendRetries", "%d is outside -1..16", c.SendRetries)
	}
	return errors.Join(errs...)
}

// StartPublisher validates cfg, builds a producer from it (name servers, credentials, the producer group in
// the namespace, no client namespace option), starts it and returns a Publisher that owns it: Close, or the
// consumer's Shutdown when given to consumer.WithDeadLetterSink, shuts it down. The name servers are not
// contacted until the first send. Errors: each invalid field's *PublisherConfigError, joined; the client's
// error creating or starting the producer, wrapped.
func StartPublisher(cfg PublisherConfig) (*Publisher, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cluster := topics.Cluster{NameServers: cfg.NameServers, Namespace: cfg.Namespace, Credentials: cfg.Credentials}
	group := cfg.Group + publisherProducerGroupSuffix
	p, err := rocketmq.NewProducer(append(dlqtool.ProducerOptions(cluster, group),
		producer.WithInstanceName(cfg.instanceName()), producer.WithRetry(cfg.sendRetries()))...)
	if err != nil {
		return nil, fmt.Errorf("dlq: start publisher: new producer %s: %w", group, err)
	}
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("dlq: start publisher: start producer %s: %w", group, err)
	}
	return &Publisher{producer: p, now: time.Now, owned: p}, nil
}

// instanceName returns InstanceName or the default.
func (c PublisherConfig) instanceName() string {
	if c.InstanceName != "" {
		return c.InstanceName
	}
	return "rmqguard-dlq-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// sendRetries returns SendRetries with its default (0 → 2, -1 → 0).
func (c PublisherConfig) sendRetries() int {
	switch c.SendRetries {
	case 0:
		return defaultPublisherSendRetries
	case -1:
		return 0
	default:
		return c.SendRetries
	}
}
