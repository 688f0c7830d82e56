package dedup_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// BenchmarkVersion measures messages/s through Classify → EventID → Dedup → [Version] → a handler writing
// nothing, on the real MariaDB with 16 goroutines; each goroutine sends the next version of an aggregate
// of its own, so every event applies. "without" is the same chain without Version: the difference is the
// cost of the version check (two statements: insert-or-lock, conditional UPDATE).
func BenchmarkVersion(b *testing.B) {
	for _, withVersion := range []bool{false, true} {
		b.Run(map[bool]string{false: "without", true: "table"}[withVersion], func(b *testing.B) {
			db := testenv.MySQL(b)
			store, err := dedup.NewStore(db)
			if err != nil {
				b.Fatal(err)
			}
			eventID, _ := middleware.EventID(middleware.EventIDConfig{})
			mws := []middleware.Middleware{middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))}
			if withVersion {
				version, err := middleware.Version(store, middleware.VersionConfig{AggregateType: "order"})
				if err != nil {
					b.Fatal(err)
				}
				mws = append(mws, version)
			}
			h := testenv.Must(middleware.Chain(dedup.Handle(func(context.Context, *sqlx.Tx, *consumer.Delivery) (consumer.Outcome, error) {
				return consumer.Processed(), nil
			}), mws...))
			w := &versionWorld{group: testenv.Unique("cg"), prefix: testenv.Unique("vb")}
			var goroutines atomic.Int64
			b.SetParallelism(8) // 8 × GOMAXPROCS(2) = 16 goroutines
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				aggregate := fmt.Sprintf("a%d", goroutines.Add(1))
				for v := int64(1); pb.Next(); v++ {
					msg := w.message(fmt.Sprintf("%s-v%d", aggregate, v), aggregate, v)
					if o, err := h.Handle(context.Background(), testenv.NewDelivery(w.group, msg)); err != nil || o.Kind != consumer.KindProcessed {
						b.Errorf("outcome %v, err %v", o, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}
