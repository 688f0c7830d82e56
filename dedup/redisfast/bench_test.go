package redisfast_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// BenchmarkDuplicate measures the duplicate path on the real MariaDB and Redis, 16 goroutines, each
// message a new message repeating one of 256 processed events: "mysql" is Dedup on the database store
// (BEGIN, the claim's 1062, the cause SELECT, ROLLBACK), "redis" is Dedup on the layer (one GET).
func BenchmarkDuplicate(b *testing.B) {
	f := newFixture(b, testenv.Redis(b), time.Hour)
	const events = 256
	h := f.chain(b, nil)
	for i := range events {
		if o, err := f.handle(h, f.msg(fmt.Sprintf("%s-%d", f.prefix, i))); err != nil || o.Kind != consumer.KindProcessed {
			b.Fatalf("seed %d: %v %v", i, o, err)
		}
	}
	for _, v := range []struct {
		name  string
		store dedup.TxStore
	}{{"mysql", f.store}, {"redis", f.layer}} {
		b.Run(v.name, func(b *testing.B) {
			h := f.chainOn(b, v.store, nil)
			var seq atomic.Int64
			b.SetParallelism(8) // 8 × GOMAXPROCS(2) = 16 goroutines
			b.ReportAllocs()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					o, err := f.handle(h, f.msg(fmt.Sprintf("%s-%d", f.prefix, seq.Add(1)%events)))
					if err != nil || o.Kind != consumer.KindDuplicate {
						b.Errorf("outcome %v, err %v", o, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}
