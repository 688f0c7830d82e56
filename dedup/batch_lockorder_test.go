package dedup_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// accountMsgs returns one message per account, event IDs prefix-1…, each carrying its account as
// AGGREGATE_ID.
func (f *fixture) accountMsgs(t *testing.T, prefix string, accounts ...string) []*primitive.MessageExt {
	msgs := make([]*primitive.MessageExt, len(accounts))
	for i, a := range accounts {
		id := fmt.Sprintf("%s-%d", prefix, i+1)
		msgs[i] = f.orderMsg(t, id, id)
		msgs[i].WithProperty("AGGREGATE_ID", a)
	}
	return msgs
}

// F37: two consumers' batches update the same hot rows at the same time, the second in
// the opposite message order. The first pass runs each batch's members in aggregate order, so both lock
// the balances in one order and one batch waits for the other instead of deadlocking: no pass is lost
// (each handler runs once), every event takes effect once and the balances reconcile. (With the members
// run in message order the two batches meet in the middle and InnoDB kills one: 1213.)
func TestBatch_F37_OppositeOrdersOverHotRowsWaitInsteadOfDeadlocking(t *testing.T) {
	f := newFixture(t)
	balances := testenv.NewBalances(t, f.db, f.prefix)
	const n = 8
	accounts := make([]string, n)
	for i := range accounts {
		accounts[i] = fmt.Sprintf("acct-%d", i+1)
	}
	reversed := make([]string, n)
	for i, a := range accounts {
		reversed[n-1-i] = a
	}
	var runs atomic.Int32
	h := func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		runs.Add(1)
		if err := balances.Add(ctx, tx, d.AggregateID, 1); err != nil {
			return consumer.Outcome{}, err
		}
		time.Sleep(20 * time.Millisecond) // holds the row while the other batch goes on
		return consumer.Processed(), f.ledger.Append(ctx, tx, d.EventID)
	}
	cbs := []*testenv.Callback{f.batchConsumer(t, false, h), f.batchConsumer(t, false, h)}
	batches := [][]*primitive.MessageExt{f.accountMsgs(t, f.prefix+"-a", accounts...), f.accountMsgs(t, f.prefix+"-b", reversed...)}

	var wg sync.WaitGroup
	results := make([]rmq.ConsumeResult, 2)
	start := make(chan struct{})
	for i := range cbs {
		wg.Go(func() {
			<-start
			results[i] = cbs[i].Deliver(t, false, batches[i]...)
		})
	}
	close(start)
	wg.Wait()

	assert.Equal(t, []rmq.ConsumeResult{rmq.ConsumeSuccess, rmq.ConsumeSuccess}, results)
	assert.Equal(t, int32(2*n), runs.Load(), "each handler ran once: no pass was lost to a deadlock")
	for i, batch := range batches {
		for _, m := range batch {
			dec := cbs[i].Decisions(m.MsgId)
			require.Len(t, dec, 1)
			assert.Equal(t, consumer.KindProcessed, dec[0].Outcome.Kind, "%s: %v", m.GetProperty("EVENT_ID"), dec[0].Err)
			assert.Equal(t, 1, f.ledger.Count(t, m.GetProperty("EVENT_ID")))
		}
	}
	want := map[string]int64{}
	for _, a := range accounts {
		want[a] = 2
	}
	assert.Equal(t, want, balances.All(t), "the balances reconcile")
}

// The first pass runs its members in AggregateID order, message order kept within an
// aggregate and members without one last; in orderly mode (consumer.Config.Orderly) in message order.
func TestBatch_MembersRunInAggregateOrderUnlessOrderly(t *testing.T) {
	for _, orderly := range []bool{false, true} {
		t.Run(map[bool]string{false: "concurrent", true: "orderly"}[orderly], func(t *testing.T) {
			f := newFixture(t)
			var order []string
			cb := f.batchConsumer(t, orderly, func(ctx context.Context, tx *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
				order = append(order, d.EventID)
				return consumer.Processed(), nil
			})
			aggregates := []string{"b", "", "a", "b", "a", ""}
			msgs := make([]*primitive.MessageExt, len(aggregates))
			ids := make([]string, len(aggregates))
			for i, a := range aggregates {
				ids[i] = fmt.Sprintf("%s-%d", f.prefix, i+1)
				msgs[i] = f.orderMsg(t, ids[i], ids[i])
				if a != "" {
					msgs[i].WithProperty("AGGREGATE_ID", a)
				}
			}
			assert.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, orderly, msgs...))
			want := []string{ids[2], ids[4], ids[0], ids[3], ids[1], ids[5]} // a, a, b, b, none, none
			if orderly {
				want = ids
			}
			assert.Equal(t, want, order)
		})
	}
}
