package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// load claims new events of one scope through EventID → Dedup → shop.HandleOrderCreated (one order row,
// one inventory_change row and the stock of one of workers SKUs per event) with a number of goroutines.
type load struct {
	scope   string
	workers int
	handler consumer.Handler
	seq     atomic.Int64
}

func newLoad(db *sqlx.DB, scope string, workers int) (*load, error) {
	store, err := dedup.NewStore(db)
	if err != nil {
		return nil, err
	}
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	if err != nil {
		return nil, err
	}
	dedupMW, err := middleware.Dedup(store)
	if err != nil {
		return nil, err
	}
	h, err := middleware.Chain(dedup.Handle(shop.HandleOrderCreated), middleware.Classify(), eventID, dedupMW)
	if err != nil {
		return nil, err
	}
	return &load{scope: scope, workers: workers, handler: h}, nil
}

// stats are the claims of one phase.
type stats struct {
	n                         int
	elapsed                   time.Duration
	p50, p95, p99             time.Duration
	lockWait, deadlock, other int
	err                       error // the phase function's
}

// measure runs the workers while phase runs, and returns their latencies.
func (l *load) measure(ctx context.Context, phase func(context.Context) error) stats {
	ctx, stop := context.WithCancel(ctx)
	var (
		mu   sync.Mutex
		lats []time.Duration
		st   stats
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range l.workers {
		wg.Go(func() {
			var mine []time.Duration
			var lw, dl, other int
			for ctx.Err() == nil {
				t0 := time.Now()
				err := l.claimOne()
				mine = append(mine, time.Since(t0))
				var me *mysql.MySQLError
				switch {
				case err == nil:
				case errors.As(err, &me) && me.Number == mysqlerr.ErLockWaitTimeout:
					lw++
				case errors.As(err, &me) && me.Number == mysqlerr.ErLockDeadlock:
					dl++
				default:
					other++
				}
			}
			mu.Lock()
			lats = append(lats, mine...)
			st.lockWait, st.deadlock, st.other = st.lockWait+lw, st.deadlock+dl, st.other+other
			mu.Unlock()
		})
	}
	st.err = phase(ctx)
	stop()
	wg.Wait()
	st.elapsed = time.Since(start)
	slices.Sort(lats)
	st.n = len(lats)
	st.p50, st.p95, st.p99 = pct(lats, 50), pct(lats, 95), pct(lats, 99)
	return st
}

// claimOne handles one new event; a failure is an error (a retry the consumer would get).
func (l *load) claimOne() error {
	n := l.seq.Add(1)
	id := fmt.Sprintf("%s-%d", l.scope, n)
	// As many SKUs as workers, taken in turn: the handler moves the SKU's stock on hand, and one SKU for all
	// would make every claim wait for that row's lock, measuring the hot row instead of the claim.
	sku := fmt.Sprintf("%s-sku-%d", l.scope, n%int64(l.workers))
	body, err := json.Marshal(shop.OrderCreated{EventID: id, OrderNo: id, SkuID: sku, Quantity: 1, AmountCents: 100})
	if err != nil {
		return err
	}
	msg := &primitive.MessageExt{MsgId: id, Message: primitive.Message{Topic: "BENCH", Body: body}}
	msg.WithProperty("EVENT_ID", id)
	// A background context: the phase's end must not cancel a claim half-way and count it as an error.
	o, err := l.handler.Handle(context.Background(), testenv.NewDelivery(l.scope, msg))
	if err == nil && o.Kind != consumer.KindProcessed {
		err = fmt.Errorf("outcome %v", o)
	}
	return err
}

// pct returns the p-th percentile of sorted latencies.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}
