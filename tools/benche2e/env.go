package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// environment is what every variant of one run shares: the broker, the database pool, the producer, and
// the list of what to remove at the end.
type environment struct {
	nameServers []string
	broker      string
	db          *sqlx.DB
	producer    rocketmq.Producer
	// rdb is the Redis of the duplicates-redis variant; nil when that variant is not run or Redis did not
	// answer (rdbErr says why).
	rdb    *redis.Client
	rdbErr error
	// outboxTopic is the topic the rmqguard-outbox variant's relay sends to; "" when it is not run.
	outboxTopic string
	run         string // unique name of the run: prefix of its topics, groups and tables
	cleanup     *cleanup
	log         io.Writer
	// hot is the backlog of the hot-row variants (produceHot); nil when none is run.
	hot *backlog
}

// cleanup remembers the topics, tables and dedup scopes a run created, to remove them when it ends (with
// the run's Redis keys, environment.redisPrefix).
type cleanup struct {
	mu     sync.Mutex
	topics []string
	tables []string
	scopes []string
	// prefixes: every table whose name starts with one is dropped (a dedup schema and outbox of a
	// prefix: whatever tables their migrations created)
	prefixes []string
}

func (c *cleanup) topic(name string) { c.mu.Lock(); c.topics = append(c.topics, name); c.mu.Unlock() }
func (c *cleanup) table(name string) { c.mu.Lock(); c.tables = append(c.tables, name); c.mu.Unlock() }
func (c *cleanup) scope(name string) { c.mu.Lock(); c.scopes = append(c.scopes, name); c.mu.Unlock() }
func (c *cleanup) prefix(p string)   { c.mu.Lock(); c.prefixes = append(c.prefixes, p); c.mu.Unlock() }

// run removes everything recorded, on a context of its own (the run's may have ended with Ctrl-C), and
// reports failures to w without stopping.
func (c *cleanup) run(env *environment, w io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.tables {
		if _, err := env.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			fmt.Fprintf(w, "cleanup: drop %s: %v\n", t, err)
		}
	}
	for _, p := range c.prefixes {
		var tables []string
		like := strings.NewReplacer(`\`, `\\`, "_", `\_`, "%", `\%`).Replace(p) + "%"
		if err := env.db.SelectContext(ctx, &tables, `SELECT table_name FROM information_schema.tables
			WHERE table_schema = DATABASE() AND table_name LIKE ?`, like); err != nil {
			fmt.Fprintf(w, "cleanup: tables of prefix %s: %v\n", p, err)
		}
		for _, t := range tables {
			if _, err := env.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
				fmt.Fprintf(w, "cleanup: drop %s: %v\n", t, err)
			}
		}
	}
	for _, s := range c.scopes {
		if err := deleteScope(ctx, env.db, s); err != nil {
			fmt.Fprintf(w, "cleanup: %v\n", err)
		}
	}
	if env.rdb != nil {
		if err := deleteRedisKeys(ctx, env.rdb, env.redisPrefix()); err != nil {
			fmt.Fprintf(w, "cleanup: %v\n", err)
		}
	}
	for _, t := range c.topics {
		if err := rmq.DeleteTopic(ctx, env.nameServers, env.broker, t); err != nil {
			fmt.Fprintf(w, "cleanup: %v\n", err)
		}
	}
}

// deleteScope deletes the processed_event rows of a dedup scope, 10,000 at a time.
func deleteScope(ctx context.Context, db *sqlx.DB, scope string) error {
	for {
		r, err := db.ExecContext(ctx, `DELETE FROM processed_event WHERE consumer_group = ? LIMIT 10000`, scope)
		if err != nil {
			return fmt.Errorf("delete processed_event rows of %s: %w", scope, err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return nil
		}
	}
}
