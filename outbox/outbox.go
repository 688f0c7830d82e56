package outbox

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/retry"
)

// EffectFunc runs one durable effect; an error means "not done, try again later".
type EffectFunc func(ctx context.Context, e Effect) error

// Effect is what an EffectFunc is given.
type Effect struct {
	// Name is the effect's name (the key of Config.Effects).
	Name string
	// IdempotencyKey is stable across attempts and relays: the derived event ID (see the package doc).
	IdempotencyKey string
	// Payload is what the handler gave Do.
	Payload []byte
	// Attempt is 1 on the first run.
	Attempt int
}

// Config configures an Outbox. The zero value relays nothing and runs no effects; Send and Do still
// record rows for another process's relay.
type Config struct {
	// NameServers ("host:port") of the cluster the messages go to; without them Run sends no messages.
	NameServers []string
	// Credentials sign the relay's requests (ACL); zero means none.
	Credentials consumer.Credentials
	// Namespace is the RocketMQ namespace of the messages' topics (as consumer.Config.Namespace): a row's
	// Topic is sent to the topic in it. Default none.
	Namespace string
	// Effects are the durable effects this process runs, by name; Run runs only these, up to 16 at once
	// (rows of distinct sharding keys), so a function may be called concurrently.
	Effects map[string]EffectFunc
	// PollInterval is how often Run looks for rows committed elsewhere, and for rows it passed over
	// while busy (due again after a back-off, retried). Default 1 s.
	PollInterval time.Duration
	// MaxBackoff caps the wait before a failed row is tried again (doubling from 100 ms). Default 30 s.
	MaxBackoff time.Duration
	// MaxEffectAttempts is how many runs an effect gets before it is parked. Default 10.
	MaxEffectAttempts int
	// EffectTimeout bounds one run of an effect: then the run counts as failed, and a function that
	// ignores its context is abandoned (it may still finish). Default 30 s.
	EffectTimeout time.Duration
	// Logger; default zap.NewNop().
	Logger *zap.Logger
	// Observer receives the relay's counts (metrics.Outbox); nil means none.
	Observer Observer
}

// Observer is told what the relay did; metrics.Outbox implements it. Calls come from Run's goroutine.
type Observer interface {
	MessageSent(topic string, ok bool)
	EffectRan(effect string, ok bool)
	RowParked(kind string)
	// Backlog reports the table's pending and parked rows and the age of the oldest pending one, about
	// every PollInterval.
	Backlog(pending, parked int, oldest time.Duration)
}

// validate returns the problems of c, each naming the field.
func (c Config) validate() error {
	var errs []error
	for i, ns := range c.NameServers {
		if !strings.Contains(ns, ":") {
			errs = append(errs, fmt.Errorf("outbox: NameServers: entry %d %q is not host:port", i, ns))
		}
	}
	if err := rmq.ValidateNamespace(c.Namespace); err != nil {
		errs = append(errs, fmt.Errorf("outbox: Namespace: %w", err))
	}
	for name, fn := range c.Effects {
		if err := checkName(name); err != nil {
			errs = append(errs, fmt.Errorf("outbox: Effects: %w", err))
		}
		if fn == nil {
			errs = append(errs, fmt.Errorf("outbox: Effects: %q has a nil function", name))
		}
	}
	if c.PollInterval < 0 || c.MaxBackoff < 0 || c.EffectTimeout < 0 || c.MaxEffectAttempts < 0 {
		errs = append(errs, errors.New("outbox: PollInterval, MaxBackoff, EffectTimeout and MaxEffectAttempts may not be negative"))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.MaxEffectAttempts == 0 {
		c.MaxEffectAttempts = 10
	}
	if c.EffectTimeout == 0 {
		c.EffectTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Outbox records outgoing messages and effects in the dedup transaction (Send, Do) and relays them (Run).
type Outbox struct {
	cfg   Config
	store *dedup.Store
	db    *sqlx.DB
	q     queries
	wake  chan struct{}
	// wakes counts the wakeRelay calls (one per commit with rows): how busy the relay's producers are.
	wakes atomic.Int64
	inst  string
}

// New returns the outbox of store's database and table prefix; the table must exist (Migrate). It returns
// cfg's Validate errors.
func New(store *dedup.Store, cfg Config) (*Outbox, error) {
	if store == nil {
		return nil, errors.New("outbox: New: store is nil")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Outbox{cfg: cfg.withDefaults(), store: store, db: store.DB(),
		q: newQueries(store.TablePrefix() + outboxsql.Table), wake: make(chan struct{}, 1),
		inst: "rmqguard-outbox-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)}, nil
}

// Message is an outgoing RocketMQ message.
type Message struct {
	// Name tells this message apart from the event's other outgoing rows; it makes the event ID. Required.
	Name  string
	Topic string // required
	Tag   string
	// Keys are added to the message's KEYS after its event ID.
	Keys       []string
	Properties map[string]string
	Body       []byte
	// ShardingKey picks the queue and orders the rows that share it; default d.AggregateID, else Keys[0],
	// else the event ID. One above 128 characters is replaced by a digest of it (also on the message).
	ShardingKey string
}

// Send records m in the dedup transaction of ctx, for d (the message being handled), and wakes the relay
// after the commit; the trace context of ctx goes with it (see the package doc). It returns m's event ID;
// dedup.ErrNoTx without a transaction; a permanent error for an invalid m or a Name used twice for d; the
// insert's error otherwise.
func (o *Outbox) Send(ctx context.Context, d *consumer.Delivery, m Message) (string, error) {
	if strings.TrimSpace(m.Topic) == "" {
		return "", retry.Permanent(errors.New("outbox: Send: Topic is empty"))
	}
	props := ""
	if p := withTraceContext(ctx, m.Properties); len(p) > 0 {
		b, err := json.Marshal(p)
		if err != nil {
			return "", retry.Permanent(fmt.Errorf("outbox: Send: properties: %w", err))
		}
		props = string(b)
	}
	key := m.ShardingKey
	if key == "" && d != nil && d.AggregateID != "" {
		key = d.AggregateID
	}
	if key == "" && len(m.Keys) > 0 {
		key = m.Keys[0]
	}
	return o.insert(ctx, d, row{Kind: outboxsql.KindMessage, Name: m.Name, ShardingKey: key, Topic: m.Topic, Tag: m.Tag,
		Keys: strings.Join(m.Keys, " "), Properties: sql.NullString{String: props, Valid: props != ""}, Body: m.Body})
}

// Do records the effect name with payload in the dedup transaction of ctx, for d; after the commit a
// relay with name in Config.Effects runs it until it succeeds or is parked. Returns and errors as Send.
func (o *Outbox) Do(ctx context.Context, d *consumer.Delivery, name string, payload []byte) (string, error) {
	return o.insert(ctx, d, row{Kind: outboxsql.KindEffect, Name: name, Body: payload})
}

func (o *Outbox) insert(ctx context.Context, d *consumer.Delivery, r row) (string, error) {
	if d == nil || d.EventID == "" {
		return "", retry.Permanent(errors.New("outbox: the delivery has no event ID"))
	}
	if err := checkName(r.Name); err != nil {
		return "", retry.Permanent(fmt.Errorf("outbox: %w", err))
	}
	tx, ok := dedup.TxFromContext(ctx)
	if !ok {
		return "", dedup.ErrNoTx
	}
	scope := o.store.Protocol().Scope(d)
	r.EventID = outboxsql.EventID(scope, d.EventID, r.Name)
	switch {
	case r.ShardingKey == "":
		r.ShardingKey = r.EventID
	case utf8.RuneCountInString(r.ShardingKey) > 128: // the column's size: a digest keeps one key one key
		sum := sha256.Sum256([]byte(r.ShardingKey))
		r.ShardingKey = "sk-" + hex.EncodeToString(sum[:20])
	}
	if r.Body == nil {
		r.Body = []byte{}
	}
	_, err := tx.ExecContext(ctx, o.q.insert, r.Kind, r.EventID, cut(d.EventID, 128), cut(scope, 128), r.Name,
		r.ShardingKey, r.Topic, r.Tag, cut(r.Keys, 1024), r.Properties, r.Body)
	if err != nil {
		if _, dup := mysqlerr.DuplicateKey(err); dup {
			return "", retry.Permanent(fmt.Errorf("outbox: %s %q recorded twice for event %s: %w", r.Kind, r.Name, d.EventID, err))
		}
		return "", fmt.Errorf("outbox: record %s %q: %w", r.Kind, r.Name, err)
	}
	// Without the middleware's Txn in ctx (ErrNoTx) there is no hook: the relay's poll finds the row.
	if err := dedup.AfterCommit(ctx, func(context.Context) { o.wakeRelay() }); err != nil && !errors.Is(err, dedup.ErrNoTx) {
		return "", fmt.Errorf("outbox: %w", err)
	}
	return r.EventID, nil
}

// wakeRelay makes Run look for due rows now (it does not block).
func (o *Outbox) wakeRelay() {
	o.wakes.Add(1)
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func checkName(name string) error {
	if name == "" || len(name) > 64 || strings.ContainsAny(name, "/ \t\n") {
		return fmt.Errorf("name %q must have 1 to 64 bytes and no '/' or blank", name)
	}
	return nil
}

func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// withTraceContext returns props with the W3C trace context of ctx's span added (traceparent, and
// tracestate when it has one), in a copy: props itself when ctx has no span or props already has a
// traceparent (the caller's choice stands).
func withTraceContext(ctx context.Context, props map[string]string) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return props
	}
	if _, set := props[traceparent]; set {
		return props
	}
	out := make(propagation.MapCarrier, len(props)+2)
	for k, v := range props {
		out[k] = v
	}
	propagation.TraceContext{}.Inject(ctx, out)
	return out
}

// traceparent is the W3C trace context's property (propagation.TraceContext).
const traceparent = "traceparent"
