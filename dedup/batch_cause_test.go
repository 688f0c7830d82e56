package dedup_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/internal/txproto"
	"github.com/rmqguard/rmqguard/middleware"
)

// causeCountingStore is the fixture's store, counting the reads of duplicate causes; fail makes the batch
// read fail.
type causeCountingStore struct {
	*dedup.Store
	mu      sync.Mutex
	single  int   // DuplicateCause calls
	batches []int // DuplicateCauses calls: the number of duplicates of each
	fail    bool
}

// Protocol is the store's, its reads of duplicate causes counted.
func (s *causeCountingStore) Protocol() txproto.Store {
	return causeCounting{Store: s.Store.Protocol(), c: s}
}

// causeCounting is the protocol of a causeCountingStore.
type causeCounting struct {
	txproto.Store
	c *causeCountingStore
}

func (p causeCounting) DuplicateCause(ctx context.Context, txn txproto.Txn, d *consumer.Delivery) (string, error) {
	p.c.mu.Lock()
	p.c.single++
	p.c.mu.Unlock()
	return p.Store.DuplicateCause(ctx, txn, d)
}

func (p causeCounting) DuplicateCauses(ctx context.Context, ds []*consumer.Delivery) ([]string, error) {
	p.c.mu.Lock()
	p.c.batches = append(p.c.batches, len(ds))
	fail := p.c.fail
	p.c.mu.Unlock()
	if fail {
		return nil, errors.New("injected: the read failed")
	}
	return p.Store.DuplicateCauses(ctx, ds)
}

// batchWithStore is a consumer with BatchSize 32 whose chain's Dedup uses store.
func (f *fixture) batchWithStore(t *testing.T, store dedup.TxStore) *testenv.Callback {
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	h := testenv.Must(middleware.Chain(dedup.Handle(f.ledger.Handler(handleOrderCreated)), middleware.Recover(zap.NewNop()),
		middleware.Classify(), eventID, testenv.Must(middleware.Dedup(store))))
	return testenv.NewCallback(t, consumer.Config{Group: f.group, Subscriptions: []consumer.Subscription{{Topic: "ORDER"}},
		BatchSize: 32}, h)
}

// F41: in a batch, the causes of the duplicates are read together, in one query after the batch's
// transaction ended, and each is the one its stored row gives — as for a message alone: the same message
// again is a redelivery (also a replay message that had itself processed its event), another message a
// re-send, a replay message of an event processed by another a replay; a member whose event an earlier
// member of the same batch processed is a duplicate of that row. A batch without duplicates reads nothing.
func TestBatch_F41_DuplicateCausesReadTogetherInOneQuery(t *testing.T) {
	f := newFixture(t)
	store := &causeCountingStore{Store: f.store}
	cb := f.batchWithStore(t, store)
	a, b, c, r := f.prefix+"-a", f.prefix+"-b", f.prefix+"-c", f.prefix+"-r"
	first := f.batchMsgs(t, a, b, c, r)
	first[3].WithProperty(letter.PropReplayID, "replay-1") // r is processed by a replay
	require.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, first...))
	assert.Empty(t, store.batches, "a batch without duplicates reads no cause")

	copyOf := func(m *primitive.MessageExt) *primitive.MessageExt {
		again := f.orderMsg(t, m.GetProperty("EVENT_ID"), m.GetKeys())
		again.MsgId = m.MsgId
		for k, v := range m.GetProperties() {
			again.WithProperty(k, v)
		}
		return again
	}
	d := f.prefix + "-d"
	replayOfC := f.orderMsg(t, c, c)
	replayOfC.WithProperty(letter.PropReplayID, "replay-2")
	dFirst := f.orderMsg(t, d, d)
	second := []*primitive.MessageExt{
		copyOf(first[0]),    // redelivery
		f.orderMsg(t, b, b), // re-send
		replayOfC,           // replay
		copyOf(first[3]),    // redelivery of the replay message that processed r
		dFirst,              // new: processed
		f.orderMsg(t, d, d), // d again in the same batch, another message: re-send
		copyOf(dFirst),      // d's first message again in the same batch: redelivery
	}
	want := []string{causelabel.Redelivery, causelabel.Resend, causelabel.Replay, causelabel.Redelivery,
		"", causelabel.Resend, causelabel.Redelivery}
	next := map[string]int{} // a message ID's next decision: after those of the first batch
	for _, m := range second {
		next[m.MsgId] = len(cb.Decisions(m.MsgId))
	}
	require.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, second...))

	for i, m := range second {
		dec := cb.Decisions(m.MsgId)[next[m.MsgId]]
		next[m.MsgId]++
		if want[i] == "" {
			assert.Equal(t, consumer.KindProcessed, dec.Outcome.Kind, "member %d", i)
			continue
		}
		assert.Equal(t, consumer.KindDuplicate, dec.Outcome.Kind, "member %d", i)
		assert.Equal(t, want[i], dec.Outcome.Cause, "member %d", i)
	}
	assert.Zero(t, store.single, "no read per duplicate")
	assert.Equal(t, []int{6}, store.batches, "one read for the batch's six duplicates")
	for _, id := range []string{a, b, c, r, d} {
		assert.Equal(t, 1, f.ledger.Count(t, id))
	}
}

// F41: when the batch's read of causes fails, its duplicates are reported with cause unknown, never a
// guess from the message (here a redelivery the broker counted, which the consumer used to call a
// redelivery whatever its row said).
func TestBatch_F41_UnreadableCausesAreUnknown(t *testing.T) {
	f := newFixture(t)
	store := &causeCountingStore{Store: f.store}
	cb := f.batchWithStore(t, store)
	a, b := f.prefix+"-a", f.prefix+"-b"
	require.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, f.batchMsgs(t, a, b)...))

	store.fail = true
	resent := f.batchMsgs(t, a, b)
	resent[0].ReconsumeTimes = 1
	require.Equal(t, rmq.ConsumeSuccess, cb.Deliver(t, false, resent...))
	for _, m := range resent {
		dec := cb.Decisions(m.MsgId)[0]
		assert.Equal(t, consumer.KindDuplicate, dec.Outcome.Kind)
		assert.Equal(t, causelabel.Unknown, dec.Outcome.Cause)
	}
	assert.Equal(t, []int{2}, store.batches)
}

// F41: DuplicateCauses reads the rows of several duplicates in one query, outside any transaction:
// each cause as DuplicateCause gives it from the stored message ID, "" for an event without a row; nothing for none.
func TestStore_F41_DuplicateCausesOfSeveralInOneRead(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.chain(t, f.ledger.Handler(handleOrderCreated))
	ev := f.prefix + "-e"
	first := f.orderMsg(t, ev, ev)
	o, err := f.handle(h, first)
	require.NoError(t, err)
	require.Equal(t, consumer.KindProcessed, o.Kind)

	delivery := func(m *primitive.MessageExt, eventID string) *consumer.Delivery {
		d := testenv.NewDelivery(f.group, m)
		d.EventID = eventID
		return d
	}
	again := f.orderMsg(t, ev, ev)
	again.MsgId = first.MsgId
	replayed := f.orderMsg(t, ev, ev)
	replayed.WithProperty(letter.PropReplayID, "replay-1")
	causes, err := f.store.Protocol().DuplicateCauses(ctx, []*consumer.Delivery{
		delivery(again, ev), delivery(f.orderMsg(t, ev, ev), ev), delivery(replayed, ev),
		delivery(f.orderMsg(t, f.prefix+"-none", "x"), f.prefix+"-none")})
	require.NoError(t, err)
	assert.Equal(t, []string{causelabel.Redelivery, causelabel.Resend, causelabel.Replay, ""}, causes)

	causes, err = f.store.Protocol().DuplicateCauses(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, causes)
}
