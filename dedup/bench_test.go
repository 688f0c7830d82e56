package dedup_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/shop"
)

// BenchmarkDedup_Transactional measures messages/s through EventID → Dedup → a handler writing one order
// row and one inventory_change row on the real MariaDB, with 16 goroutines as the consumer would use.
// Each message is a new event (commit path).
func BenchmarkDedup_Transactional(b *testing.B) {
	f := newFixture(b)
	h := f.chain(b, shop.HandleOrderCreated)
	var seq atomic.Int64
	b.SetParallelism(8) // 8 × GOMAXPROCS(2) = 16 goroutines
	b.ReportAllocs()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("%s-%d", f.prefix, seq.Add(1))
			o, _, err := f.handle(h, f.orderMsg(b, id, id))
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
	h := f.chain(b, shop.HandleOrderCreated)
	id := f.prefix + "-dup"
	if o, _, err := f.handle(h, f.orderMsg(b, id, id)); err != nil || o.Kind != consumer.KindProcessed {
		b.Fatalf("first: %v %v", o, err)
	}
	b.SetParallelism(8)
	b.ReportAllocs()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			o, _, err := f.handle(h, f.orderMsg(b, id, id))
			if err != nil || o.Kind != consumer.KindDuplicate {
				b.Errorf("outcome %v, err %v", o, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
