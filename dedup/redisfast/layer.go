package redisfast

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dupcause"
	"github.com/rmqguard/rmqguard/internal/txproto"
)

// Reasons a Layer falls through to the database (or fails to write a key), given to Observer.RedisFallback.
const (
	// reasonMiss: no "done" key (never written, expired, evicted, or lost by Redis).
	reasonMiss = "miss"
	// reasonTimeout: the lookup took longer than Config.Timeout.
	reasonTimeout = "timeout"
	// reasonError: Redis answered with an error or could not be reached.
	reasonError = "error"
	// reasonMarkFailed: writing a "done" key after a commit failed or timed out; the event stays processed,
	// and its next delivery asks the database.
	reasonMarkFailed = "mark_failed"
	// reasonSkipped: a lookup or key write not sent to Redis because a command failed or timed out less
	// than Config.Cooldown ago.
	reasonSkipped = "skipped"
)

// DefaultTimeout bounds each Redis command when Config.Timeout is zero: a slow Redis must cost a message
// little more than the database round trips it would have saved.
const DefaultTimeout = 50 * time.Millisecond

// MaxTimeout is the largest Config.Timeout accepted.
const MaxTimeout = time.Second

// defaultCooldown is how long a Layer leaves Redis alone after a failed or timed-out command when
// Config.Cooldown is zero.
const defaultCooldown = time.Second

// Observer counts the layer's fall-throughs by reason: "miss", "timeout", "error", "mark_failed" or
// "skipped" (the constants above say when). It must be safe for concurrent use; *metrics.Metrics implements it.
type Observer interface {
	RedisFallback(reason string)
}

// Config configures a Layer.
type Config struct {
	// Prefix starts every key of the layer (required, e.g. "rmqguard:"), so that several applications or
	// tests share one Redis. A key is Prefix + "done:" + len(scope) + ":" + scope + ":" + event ID; when the
	// store is a *dedup.Store on prefixed tables (dedup.WithTablePrefix), "done:" is followed by the table
	// prefix and "@", so that two schemas sharing Prefix never answer for each other's events.
	Prefix string
	// TTL is how long a "done" key lives (required, > 0). Past it the database decides again; a TTL
	// longer than the dedup window (the processed_event retention) would answer for rows already purged.
	TTL time.Duration
	// Timeout bounds each Redis command (0 = DefaultTimeout, at most MaxTimeout). The client must honour
	// the context's deadline (go-redis: redis.Options.ContextTimeoutEnabled); with MaxRetries -1 and
	// DialerRetries 1 a Redis that is down costs a refused dial (reasonError) instead of the whole timeout
	// (go-redis's defaults retry the dial 5 times, 100 ms apart: reasonTimeout on every command).
	Timeout time.Duration
	// Cooldown is how long the layer sends Redis nothing after a command failed or timed out (0 =
	// 1 s; not negative): lookups fall through to the database and key writes are dropped at
	// once, counted as reasonSkipped. Without it a Redis that accepts connections but never answers (a
	// partition) would cost every new message two timeouts (the lookup and the key write), 100 ms by default.
	Cooldown time.Duration
	// Observer counts fall-throughs (optional).
	Observer Observer
}

// Layer is a dedup.TxStore that answers "done" from Redis and otherwise delegates to the store it wraps.
// It is safe for concurrent use.
type Layer struct {
	inner txproto.Store // the wrapped store's protocol
	rdb   redis.UniversalClient
	cfg   Config
	// keyHead starts every done key: Prefix + "done:" (+ the store's table prefix + "@", see Config.Prefix).
	keyHead string
	// quietUntil is when the cool-down after the last failed command ends (Unix nanoseconds; 0: none).
	quietUntil atomic.Int64
}

var _ dedup.TxStore = (*Layer)(nil)

// New returns the layer of store on rdb. It returns an error naming the field when store (also a nil
// pointer in the interface, e.g. the *dedup.Store of a dedup.NewStore that failed) or rdb is nil,
// Prefix is empty, TTL is not positive, Timeout is negative or above MaxTimeout, Cooldown is negative, or
// rdb is a go-redis *Client, *ClusterClient or *Ring whose options leave ContextTimeoutEnabled off (its
// commands would wait for the client's ReadTimeout, 3 s by default, whatever Config.Timeout says).
func New(store dedup.TxStore, rdb redis.UniversalClient, cfg Config) (*Layer, error) {
	switch {
	case store == nil:
		return nil, errors.New("redisfast: New: store is nil")
	case isNilPointer(store):
		return nil, fmt.Errorf("redisfast: New: store is a nil %T: check the error of the call that built it (dedup.NewStore?)", store)
	case rdb == nil:
		return nil, errors.New("redisfast: New: rdb is nil")
	case cfg.Prefix == "":
		return nil, errors.New("redisfast: Config.Prefix is empty: keys of several applications would collide")
	case cfg.TTL <= 0:
		return nil, fmt.Errorf("redisfast: Config.TTL is %v: a done key needs a positive time to live", cfg.TTL)
	case cfg.Timeout < 0 || cfg.Timeout > MaxTimeout:
		return nil, fmt.Errorf("redisfast: Config.Timeout is %v: must be between 0 (default %v) and %v", cfg.Timeout, DefaultTimeout, MaxTimeout)
	case cfg.Cooldown < 0:
		return nil, fmt.Errorf("redisfast: Config.Cooldown is %v: must be 0 (default %v) or positive", cfg.Cooldown, defaultCooldown)
	case !honoursDeadline(rdb):
		return nil, errors.New("redisfast: New: rdb ignores context deadlines, so Config.Timeout would not bound its commands " +
			"(a Redis that does not answer would cost each one the client's ReadTimeout): set ContextTimeoutEnabled in its options")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Cooldown == 0 {
		cfg.Cooldown = defaultCooldown
	}
	return &Layer{inner: store.Protocol(), rdb: rdb, cfg: cfg, keyHead: keyHead(cfg.Prefix, store)}, nil
}

// keyHead is the start of store's done keys: prefix + "done:", followed by the table prefix of a store on
// prefixed tables and "@" (a character no table prefix holds), so that such keys never equal the keys of a
// store on other tables (dedup.WithTablePrefix).
func keyHead(prefix string, store dedup.TxStore) string {
	head := prefix + "done:"
	if s, ok := store.(interface{ TablePrefix() string }); ok && s.TablePrefix() != "" {
		head += s.TablePrefix() + "@"
	}
	return head
}

// isNilPointer reports whether store holds a nil pointer (a typed nil).
func isNilPointer(store dedup.TxStore) bool {
	v := reflect.ValueOf(store)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// honoursDeadline reports whether rdb's commands end at their context's deadline (ContextTimeoutEnabled);
// true for client types whose options it cannot read.
func honoursDeadline(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Key returns the "done" key of d's event in its scope (see Config.Prefix for its shape).
func (l layerProtocol) Key(d *consumer.Delivery) string {
	scope := l.inner.Scope(d)
	return l.keyHead + strconv.Itoa(len(scope)) + ":" + scope + ":" + d.EventID
}

// Done looks d's "done" key up (one GET, bounded by Config.Timeout). A key means the event's row committed:
// it returns the duplicate's cause from the message ID the key holds (as the dedup store's DuplicateCause does),
// or "" when the key holds none (written for a duplicate whose original message is unknown). A missing key, an error or a
// timeout is counted and returns false: the database decides; an error or a timeout also starts the
// cool-down (Config.Cooldown), during which Done asks nothing and returns false (reasonSkipped).
func (l layerProtocol) Done(ctx context.Context, d *consumer.Delivery) (string, bool) {
	if l.quiet() {
		return "", false
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	msgID, err := l.rdb.Get(ctx, l.Key(d)).Result()
	if err != nil {
		reason := lookupReason(err)
		if reason != reasonMiss {
			l.coolDown()
		}
		l.fallback(reason)
		return "", false
	}
	if msgID == "" {
		return "", true
	}
	return dupcause.Of(msgID, d), true
}

// lookupReason names why a GET did not answer.
func lookupReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, redis.Nil):
		return reasonMiss
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return reasonTimeout
	default:
		return reasonError
	}
}

// quiet reports (and counts as reasonSkipped) that the cool-down after a failed command is running.
func (l *Layer) quiet() bool {
	if time.Now().UnixNano() < l.quietUntil.Load() {
		l.fallback(reasonSkipped)
		return true
	}
	return false
}

// coolDown starts the cool-down: Redis is left alone for Config.Cooldown.
func (l *Layer) coolDown() { l.quietUntil.Store(time.Now().Add(l.cfg.Cooldown).UnixNano()) }

func (l *Layer) fallback(reason string) {
	if l.cfg.Observer != nil {
		l.cfg.Observer.RedisFallback(reason)
	}
}
