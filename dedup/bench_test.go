package dedup_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// BenchmarkDedup_Transactional measures messages/s through EventID → Dedup → a handler writing one order
// row and one inventory_change row on the real MariaDB, with 16 goroutines as the consumer would use.
// Each message is a new event (commit path).
func BenchmarkDedup_Transactional(b *testing.B) {
	f := newFixture(b)
	h := f.chain(b, handleOrderCreated)
	var seq atomic.Int64
	b.SetParallelism(8) // 8 × GOMAXPROCS(2) = 16 goroutines
	b.ReportAllocs()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("%s-%d", f.prefix, seq.Add(1))
			o, err := f.handle(h, f.orderMsg(b, id, id))
			if err != nil || o.Kind != consumer.KindProcessed {
				b.Errorf("outcome %v, err %v", o, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkDedup_Duplicate measures the duplicate path: every message repeats an event already processed.
func BenchmarkDedup_Duplicate(b *testing.B) {
	f := newFixture(b)
	h := f.chain(b, handleOrderCreated)
	id := f.prefix + "-dup"
	if o, err := f.handle(h, f.orderMsg(b, id, id)); err != nil || o.Kind != consumer.KindProcessed {
		b.Fatalf("first: %v %v", o, err)
	}
	b.SetParallelism(8)
	b.ReportAllocs()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			o, err := f.handle(h, f.orderMsg(b, id, id))
			if err != nil || o.Kind != consumer.KindDuplicate {
				b.Errorf("outcome %v, err %v", o, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkBatch_CommitPath compares, on the real MariaDB and the store's own pool (WithTxDSN), the commit
// path of a message handled alone (its own transaction) with a member of a 32-message batch (one
// transaction per callback, a SAVEPOINT per member: consumer.Config.BatchSize 32), through the consumer's
// callback, 16 goroutines, each message inserting one order row (insertOrder: no row shared between
// messages, as in make bench-e2e; handleOrderCreated's stock update is one hot row, which a batch
// transaction holds for its whole batch). One op is one message; msgs/s is the throughput. Run it interleaved
// (-count 1, several times) and compare with benchstat.
func BenchmarkBatch_CommitPath(b *testing.B) {
	for _, size := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			f := newFixture(b)
			cfg := consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}}, BatchSize: size}
			cb := testenv.NewCallback(b, cfg, f.chain(b, insertOrder))
			var seq atomic.Int64
			b.SetParallelism(8) // 8 × GOMAXPROCS(2) = 16 goroutines
			b.ReportAllocs()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				batch := make([]*primitive.MessageExt, 0, size)
				flush := func() {
					if len(batch) == 0 {
						return
					}
					if res := cb.Deliver(b, false, batch...); res != rmq.ConsumeSuccess {
						b.Errorf("result %v", res)
					}
					batch = batch[:0]
				}
				for pb.Next() {
					id := fmt.Sprintf("%s-%d", f.prefix, seq.Add(1))
					batch = append(batch, f.orderMsg(b, id, id))
					if len(batch) == size {
						flush()
					}
				}
				flush()
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}

// insertOrder is a handler writing one orders row of its own per event.
func insertOrder(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
	if _, err := tx.ExecContext(ctx, `INSERT INTO dedup_test_order (order_no, sku_id, quantity, amount_cents, status, version, created_at, updated_at)
		VALUES (?, 'sku-bench', 1, 1, 'CREATED', 1, NOW(6), NOW(6))`, d.EventID); err != nil {
		return consumer.Outcome{}, err
	}
	return consumer.Processed(), nil
}
