package consumer

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// Defaults applied by Config.withDefaults when a field is left zero.
const (
	// defaultMaxAttempts is the client's own default MaxReconsumeTimes for concurrent consumption.
	defaultMaxAttempts = 16
	// defaultConsumeGoroutines is the client's default number of consume goroutines.
	defaultConsumeGoroutines = 20
	// defaultBatchSize is one message per callback, so each message has its own transaction and result.
	defaultBatchSize = 1
	// defaultHandlerTimeout bounds one handler call.
	defaultHandlerTimeout = 30 * time.Second
	// defaultConsumeTimeout is the client's consume timeout (15 minutes).
	defaultConsumeTimeout = 15 * time.Minute
	// defaultDrainTimeout bounds how long Shutdown waits for in-flight handlers.
	defaultDrainTimeout = 30 * time.Second
	// defaultLagInterval is how often the lag poller reads the client's GetOffsetDiffMap.
	defaultLagInterval = 10 * time.Second
	// defaultOutageWait bounds how long one callback waits for an unavailable store: 5 minutes, or a third
	// of ConsumeTimeout when that is less.
	defaultOutageWait = 5 * time.Minute
	// maxGroupLength is the longest consumer group name RocketMQ accepts.
	maxGroupLength = 255
	// maxBatchSize is the largest ConsumeMessageBatchMaxSize the client accepts.
	maxBatchSize = 1024
	// defaultSuspendTime is how long an orderly queue pauses after a failure: 1 s, the Java client's
	// default (the Go client's orderly context says -1 ms, which is no pause at all: a hot loop).
	defaultSuspendTime = time.Second
	// minSuspendTime and maxSuspendTime bound Config.SuspendTime: the range both the Go and the Java client
	// clamp a queue's suspension to (submitConsumeRequestLater).
	minSuspendTime = 10 * time.Millisecond
	maxSuspendTime = 30 * time.Second
)

// Subscription is one topic the consumer group subscribes to.
type Subscription struct {
	// Topic is the business topic, e.g. "ORDER". Required.
	Topic string
	// Expression is the tag expression, e.g. "*" (default) or "OrderCreated || OrderPaid": "*" alone, or
	// tags separated by "||". The broker filters the topic by it; a retried message comes back through
	// %RETRY%<group>, which the client subscribes with "*", so the consumer applies it again and
	// acknowledges, without handling, a message whose tag it does not name (KindUnsubscribed).
	Expression string
}

// Config configures a Consumer. Zero fields take the documented defaults; Validate (called by New)
// rejects what cannot work, naming the field.
type Config struct {
	// NameServers are the name server addresses, "host:port". Required: there is no silent default.
	NameServers []string
	// Group is the consumer group. Required. Dedup keys are scoped by it.
	Group string
	// Subscriptions are the topics consumed. At least one is required; topics must be distinct.
	Subscriptions []Subscription
	// InstanceName is the client instance name; the client shares one client per ClientID (IP@instance),
	// so two processes on one host must differ. Default: "rmqguard-<pid>-<random>".
	InstanceName string
	// MaxAttempts is the client's MaxReconsumeTimes: a message is delivered at most MaxAttempts+1 times,
	// then dead-lettered. Default 16; 1..1000. Orderly: the same count, kept by the client in memory; the last
	// failing delivery is published to %DLQ%<group> by the consumer. See the package doc, "MaxAttempts".
	MaxAttempts int
	// ConsumeGoroutines is the number of goroutines handling messages of each topic the consumer reads:
	// the client has a pool of this size for every subscription and one for %RETRY%<group>, so up to
	// ConsumeGoroutines × (len(Subscriptions)+1) handlers run at once. Default 20; 1..1000.
	// Orderly: not used; the client consumes each queue it holds in one goroutine of its own.
	ConsumeGoroutines int
	// BatchSize is ConsumeMessageBatchMaxSize: messages per callback. Default 1; 1..1024. A batch is
	// acknowledged or retried as a whole; above 1 the members share one transaction through middleware.Dedup.
	// See the package doc, "BatchSize".
	BatchSize int
	// HandlerTimeout is the deadline of the context each message is handled with. Default 30 s; it must
	// be below ConsumeTimeout so that the framework, not the client, decides a slow message.
	HandlerTimeout time.Duration
	// ConsumeTimeout is the client's consume timeout. Default 15 min. Orderly: the client never sends a
	// slow message back (its expired-message cleaner runs for concurrent consumption only); a slow handler
	// holds its queue until HandlerTimeout ends it. The bounds against HandlerTimeout and OutageWait
	// still apply.
	ConsumeTimeout time.Duration
	// DrainTimeout bounds how long Shutdown waits for in-flight handlers before cancelling their
	// contexts (their transactions roll back). Default 30 s.
	DrainTimeout time.Duration
	// StartFromFirstOffset makes a group with no stored offset start at the first message still on the
	// broker. Default false: at the end of each queue, except that the broker reads a young topic's queue
	// (its offset-0 message still in memory) from offset 0, so a new group sees its history; dedup makes
	// that harmless for events this group's scope processed, else give the group its own topic or reset its
	// offsets (mqadmin resetOffsetByTime). In orderly mode a queue is read only while this process holds its
	// broker lock (renewed every 20 s): one locked by a process just killed waits for the lock to expire.
	StartFromFirstOffset bool
	// Orderly selects the client's orderly consumption (WithConsumerOrder): each queue is consumed by one
	// goroutine, message after message, under a lock on the broker, so messages sent to one queue (e.g.
	// chosen by aggregate ID: producer.NewHashQueueSelector and Message.WithShardingKey) are handled in
	// send order. A failure suspends the queue for SuspendTime and the same message is handled again;
	// messages behind it wait. Default false (concurrent consumption).
	Orderly bool
	// SuspendTime is, in orderly mode, how long a queue pauses after a message was not acknowledged
	// (failed, store unavailable past OutageWait, dead-letter publish failed) before the message is
	// handled again. Default 1 s; 10 ms..30 s. Setting it without Orderly
	// is an error: it would have no effect.
	SuspendTime time.Duration
	// Namespace is the RocketMQ namespace of the group and its topics ("" = none; letters, digits, '-',
	// '_'). Group and Subscriptions name them without it; on the broker they are "ns%G", "ns%T",
	// "%RETRY%ns%G" and "%DLQ%ns%G". Delivery.Group and Delivery.Topic are without it.
	Namespace string
	// Credentials are the ACL credentials every request of the consumer (and of its own dead-letter
	// producer) is signed with; both keys or neither. The zero value means no ACL.
	Credentials Credentials
	// OutageWait bounds how long one callback waits for an unavailable store (and a batch retries a failed
	// dead-letter publish) before answering ConsumeRetryLater, which spends an attempt. Default 5 min, or
	// ConsumeTimeout / 3 when less; it must be below ConsumeTimeout. See the package doc, "OutageWait".
	OutageWait time.Duration
	// SkipTopicEnsure turns off the topic ensure of Start. By default Start first creates the group's
	// %RETRY% and %DLQ% topics (one queue each, on every master; a write-only DLQ made readable) when they
	// are missing: the client sees a topic created later only on its next route refresh (30 s). Set it when
	// the consumer's keys may not create topics and the topics exist (rmqguard topic ensure).
	SkipTopicEnsure bool
	// LagInterval is how often, with WithObserver, the consumer reads its lag from the client
	// (GetOffsetDiffMap) and reports it (Observer.Lag, rmqguard_consumer_lag). Default 10 s; at least 100 ms.
	LagInterval time.Duration
}

// configError reports an invalid Config field.
type configError struct {
	// Field is the Config field's name, e.g. "NameServers".
	Field string
	// Problem says what is wrong with it.
	Problem string
}

// Error renders "consumer config: <Field>: <Problem>".
func (e *configError) Error() string { return "consumer config: " + e.Field + ": " + e.Problem }

// Validate checks c as it would be used (after defaults) and returns every problem found, joined, each
// "consumer config: <Field>: <problem>". It does not change c; New calls it first.
func (c Config) Validate() error {
	d := c.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &configError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if len(d.NameServers) == 0 {
		bad("NameServers", "required: give at least one name server address, e.g. 127.0.0.1:9876")
	}
	for i, ns := range d.NameServers {
		if !validHostPort(ns) {
			bad("NameServers", "entry %d %q is not host:port", i, ns)
		}
	}
	if strings.TrimSpace(d.Group) == "" {
		bad("Group", "required")
	} else if len(d.Group) > maxGroupLength {
		bad("Group", "%d characters, more than RocketMQ's %d", len(d.Group), maxGroupLength)
	} else if rmq.IsSystemTopic(d.Group) {
		bad("Group", "%q must not start with %s or %s", d.Group, rmq.RetryTopicPrefix, rmq.DLQTopicPrefix)
	}
	if len(d.Subscriptions) == 0 {
		bad("Subscriptions", "at least one topic is required")
	}
	seen := map[string]bool{}
	for i, s := range d.Subscriptions {
		switch {
		case strings.TrimSpace(s.Topic) == "":
			bad("Subscriptions", "entry %d has an empty Topic", i)
		case seen[s.Topic]:
			bad("Subscriptions", "topic %q is subscribed twice", s.Topic)
		}
		if _, err := parseTagExpression(s.Expression); err != nil {
			bad("Subscriptions", "entry %d (topic %q) has an invalid tag expression: %v", i, s.Topic, err)
		}
		seen[s.Topic] = true
	}
	if d.MaxAttempts < 1 || d.MaxAttempts > 1000 {
		bad("MaxAttempts", "%d is outside 1..1000", d.MaxAttempts)
	}
	if d.ConsumeGoroutines < 1 || d.ConsumeGoroutines > 1000 {
		bad("ConsumeGoroutines", "%d is outside 1..1000", d.ConsumeGoroutines)
	}
	if d.BatchSize < 1 || d.BatchSize > maxBatchSize {
		bad("BatchSize", "%d is outside 1..%d", d.BatchSize, maxBatchSize)
	}
	if d.HandlerTimeout <= 0 {
		bad("HandlerTimeout", "%s must be positive", d.HandlerTimeout)
	}
	if d.ConsumeTimeout <= 0 {
		bad("ConsumeTimeout", "%s must be positive", d.ConsumeTimeout)
	}
	if d.HandlerTimeout >= d.ConsumeTimeout {
		bad("HandlerTimeout", "%s must be below ConsumeTimeout %s, so the framework decides a slow message before the client does",
			d.HandlerTimeout, d.ConsumeTimeout)
	}
	if d.DrainTimeout <= 0 {
		bad("DrainTimeout", "%s must be positive", d.DrainTimeout)
	}
	if d.OutageWait <= 0 {
		bad("OutageWait", "%s must be positive", d.OutageWait)
	} else if d.OutageWait >= d.ConsumeTimeout {
		bad("OutageWait", "%s must be below ConsumeTimeout %s, or the client sends the waiting message back itself, spending an attempt",
			d.OutageWait, d.ConsumeTimeout)
	}
	if d.LagInterval < 100*time.Millisecond {
		bad("LagInterval", "%s is below 100ms; leave it 0 for the default %s", d.LagInterval, defaultLagInterval)
	}
	if err := rmq.ValidateNamespace(d.Namespace); err != nil {
		bad("Namespace", "%v", err)
	} else if g := rmq.InNamespace(d.Namespace, d.Group); len(g) > maxGroupLength {
		bad("Namespace", "group in the namespace %q has %d characters, more than RocketMQ's %d", g, len(g), maxGroupLength)
	}
	if (d.Credentials.AccessKey == "") != (d.Credentials.SecretKey == "") {
		bad("Credentials", "give both AccessKey and SecretKey, or neither (%s)", d.Credentials)
	}
	if d.Orderly && (d.SuspendTime < minSuspendTime || d.SuspendTime > maxSuspendTime) {
		bad("SuspendTime", "%s is outside %s..%s", d.SuspendTime, minSuspendTime, maxSuspendTime)
	} else if !d.Orderly && d.SuspendTime != 0 {
		bad("SuspendTime", "%s is set but Orderly is false: it applies to orderly consumption only", d.SuspendTime)
	}
	return errors.Join(errs...)
}

// withDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.InstanceName == "" {
		c.InstanceName = "rmqguard-" + strconv.Itoa(os.Getpid()) + "-" + uuid.NewString()[:8]
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = defaultMaxAttempts
	}
	if c.ConsumeGoroutines == 0 {
		c.ConsumeGoroutines = defaultConsumeGoroutines
	}
	if c.BatchSize == 0 {
		c.BatchSize = defaultBatchSize
	}
	if c.HandlerTimeout == 0 {
		c.HandlerTimeout = defaultHandlerTimeout
	}
	if c.ConsumeTimeout == 0 {
		c.ConsumeTimeout = defaultConsumeTimeout
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = defaultDrainTimeout
	}
	if c.OutageWait == 0 {
		c.OutageWait = min(defaultOutageWait, c.ConsumeTimeout/3)
	}
	if c.LagInterval == 0 {
		c.LagInterval = defaultLagInterval
	}
	if c.Orderly && c.SuspendTime == 0 {
		c.SuspendTime = defaultSuspendTime
	}
	subs := make([]Subscription, len(c.Subscriptions))
	for i, s := range c.Subscriptions {
		if s.Expression == "" {
			s.Expression = "*"
		}
		subs[i] = s
	}
	c.Subscriptions = subs
	return c
}

func validHostPort(s string) bool {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return false
	}
	port, err := strconv.Atoi(s[i+1:])
	return err == nil && port > 0 && port < 65536
}
