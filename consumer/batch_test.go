package consumer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	ibatch "github.com/rmqguard/rmqguard/internal/batch"
	"github.com/rmqguard/rmqguard/internal/causelabel"
)

// sharedResource is a BatchResource that records its Finish calls and returns err.
type sharedResource struct {
	err      error
	finishes int
	ctxLive  bool // the batch context was still live when Finish ran
}

func (r *sharedResource) Finish(ctx context.Context) error {
	r.finishes++
	r.ctxLive = ctx.Err() == nil
	return r.err
}

// With BatchSize > 1 the members share the callback's Batch; a resource attached by one member is finished
// once after the last member, and when it fails the callback is handled once more in a fresh Batch (losing
// the shared transaction is not the members' own failure); when that pass fails too, each member is handled
// alone, without a Batch, and decided from that pass. With BatchSize 1 there is no Batch.
func TestBatch_ResourceFinishedOnceAfterTheLastMemberALostBatchHandledAgainThenAlone(t *testing.T) {
	for _, fails := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("finish fails in %d passes", fails), func(t *testing.T) {
			var resources []*sharedResource
			var seen []*ibatch.Batch[consumer.Outcome, string]
			runs, alone := map[string]int{}, map[string]int{}
			h := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
				b := ibatch.FromContext[consumer.Outcome, string](ctx)
				if b == nil {
					alone[d.Msg.GetKeys()]++
					return consumer.Processed(), nil
				}
				seen = append(seen, b)
				runs[d.Msg.GetKeys()]++
				if b.Resource("tx") == nil {
					res := &sharedResource{}
					if len(resources) < fails {
						res.err = fmt.Errorf("commit refused in pass %d", len(resources)+1)
					}
					resources = append(resources, res)
					require.NoError(t, b.Attach("tx", res))
				}
				require.Error(t, b.Attach("tx", resources[len(resources)-1]), "one resource per key")
				assert.Zero(t, resources[len(resources)-1].finishes, "not finished while members run")
				if d.Msg.GetKeys() == "b" {
					return consumer.Duplicate(), nil // did not depend on the resource
				}
				b.Depend("tx", b.Member())
				return consumer.Processed(), nil
			}
			obs := &fakeObserver{}
			cfg := validConfig()
			cfg.BatchSize = 8
			_, fp := newConsumer(t, cfg, consumer.HandlerFunc(h), consumer.WithObserver(obs))
			a, b, c := orderMsg("a"), orderMsg("b"), orderMsg("c")
			res2, _ := fp.deliver(t, "ORDER", a, b, c)
			passes := min(fails+1, 2)
			require.Len(t, resources, passes, "a lost batch is handled once more in a Batch, never twice more")
			for _, r := range resources {
				assert.Equal(t, 1, r.finishes)
				assert.True(t, r.ctxLive, "finished with the batch's own context, not a member's")
			}
			assert.Same(t, seen[0], seen[2], "one Batch per callback")
			assert.Equal(t, map[string]int{"a": passes, "b": passes, "c": passes}, runs)
			if passes == 2 {
				assert.NotSame(t, seen[0], seen[3], "the second pass has a Batch of its own")
			}
			for _, m := range []string{a.MsgId, b.MsgId, c.MsgId} {
				require.Len(t, obs.decisions(m), 1, "one decision per message, from the last pass")
			}
			assert.Equal(t, rmq.ConsumeSuccess, res2, "no member failed on its own")
			assert.Equal(t, consumer.KindProcessed, obs.decisions(a.MsgId)[0].Outcome.Kind)
			assert.NoError(t, obs.decisions(a.MsgId)[0].Err)
			if fails < 2 {
				assert.Empty(t, alone, "no member handled alone")
				return
			}
			assert.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1}, alone, "lost twice: each member handled alone, once")
			assert.Equal(t, consumer.KindProcessed, obs.decisions(b.MsgId)[0].Outcome.Kind, "decided from the pass alone")
			assert.False(t, obs.decisions(b.MsgId)[0].BatchRetried)
		})
	}
	t.Run("BatchSize 1", func(t *testing.T) {
		var b *ibatch.Batch[consumer.Outcome, string]
		ran := false
		_, fp := newConsumer(t, validConfig(), consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
			b, ran = ibatch.FromContext[consumer.Outcome, string](ctx), true
			return consumer.Processed(), nil
		}))
		fp.deliver(t, "ORDER", orderMsg("a"))
		require.True(t, ran)
		assert.Nil(t, b)
	})
}

// A callback holding a single message handles it alone even with BatchSize > 1: no Batch, so no shared
// transaction and no savepoint for it.
func TestBatch_SingleMessageCallbackHasNoBatch(t *testing.T) {
	cfg := validConfig()
	cfg.BatchSize = 32
	var b *ibatch.Batch[consumer.Outcome, string]
	ran := false
	_, fp := newConsumer(t, cfg, consumer.HandlerFunc(func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		b, ran = ibatch.FromContext[consumer.Outcome, string](ctx), true
		return consumer.Processed(), nil
	}))
	fp.deliver(t, "ORDER", orderMsg("a"))
	require.True(t, ran)
	assert.Nil(t, b)
}

// A batch's shared resource lost to the store (Finish wraps ErrStoreUnavailable) is not the
// members' failure: the consumer waits at the store gate and handles the whole callback again with a new
// Batch, spending no attempt; a store that stays lost past OutageWait ends in a retry (no endless loop).
func TestBatch_ResourceLostToTheStoreHandlesTheCallbackAgain(t *testing.T) {
	for _, lost := range []int{1, 1 << 30} {
		t.Run(map[bool]string{true: "lost once", false: "lost past OutageWait"}[lost == 1], func(t *testing.T) {
			passes := 0
			h := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
				b := ibatch.FromContext[consumer.Outcome, string](ctx)
				if b.Resource("tx") == nil {
					passes++
					r := &sharedResource{}
					if passes <= lost {
						r.err = fmt.Errorf("commit: broken connection: %w", ibatch.ErrStoreUnavailable)
					}
					require.NoError(t, b.Attach("tx", r))
				}
				b.Depend("tx", b.Member())
				return consumer.Processed(), nil
			}
			cfg := validConfig()
			cfg.BatchSize = 8
			cfg.OutageWait = 500 * time.Millisecond
			_, fp := newConsumer(t, cfg, consumer.HandlerFunc(h))
			res, _ := fp.deliver(t, "ORDER", orderMsg("a"), orderMsg("b"))
			if lost == 1 {
				assert.Equal(t, rmq.ConsumeSuccess, res, "handled again once the store is back")
				assert.Equal(t, 2, passes)
				return
			}
			assert.Equal(t, rmq.ConsumeRetryLater, res, "past OutageWait the batch is retried")
			assert.Greater(t, passes, 1)
		})
	}
}

// causeResource is a BatchResource that, when it finishes, sets the causes of the batch's duplicates
// together (as middleware.Dedup does with one read for the batch).
type causeResource struct {
	b      *ibatch.Batch[consumer.Outcome, string]
	causes map[int]string
}

func (r *causeResource) Finish(context.Context) error {
	for i, c := range r.causes {
		r.b.SetDuplicateCause(i, c)
	}
	return nil
}

// F41: causes a batch resource sets when it finishes reach the decisions of the members that are duplicates
// without a cause; a member with a cause of its own, one that is not a duplicate, and a cause that is not
// a duplicate's keep what they had (a duplicate without a known cause is unknown).
func TestBatch_F41_DuplicateCausesSetAtFinishReachTheDecisions(t *testing.T) {
	own := consumer.Duplicate()
	own.Cause = causelabel.Resend
	outcomes := map[string]consumer.Outcome{"a": consumer.Duplicate(), "b": own, "c": consumer.Processed(),
		"d": consumer.Duplicate(), "e": consumer.Duplicate()}
	h := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		b := ibatch.FromContext[consumer.Outcome, string](ctx)
		require.NotNil(t, b)
		if b.Resource("causes") == nil {
			require.NoError(t, b.Attach("causes", &causeResource{b: b, causes: map[int]string{
				0: causelabel.Replay, 1: causelabel.Redelivery, 2: causelabel.Redelivery, 3: causelabel.Permanent}}))
		}
		return outcomes[d.Msg.GetKeys()], nil
	}
	obs := &fakeObserver{}
	cfg := validConfig()
	cfg.BatchSize = 8
	_, fp := newConsumer(t, cfg, consumer.HandlerFunc(h), consumer.WithObserver(obs))
	msgs := []string{"a", "b", "c", "d", "e"}
	var ids []string
	var sent []*primitive.MessageExt
	for _, k := range msgs {
		m := orderMsg(k)
		ids = append(ids, m.MsgId)
		sent = append(sent, m)
	}
	res, _ := fp.deliver(t, "ORDER", sent...)
	require.Equal(t, rmq.ConsumeSuccess, res)

	want := []struct {
		kind  consumer.Kind
		cause string
	}{
		{consumer.KindDuplicate, causelabel.Replay},  // set by the resource
		{consumer.KindDuplicate, causelabel.Resend},  // the chain's own
		{consumer.KindProcessed, ""},                 // not a duplicate
		{consumer.KindDuplicate, causelabel.Unknown}, // not a duplicate's cause
		{consumer.KindDuplicate, causelabel.Unknown}, // none set
	}
	for i, w := range want {
		dec := onlyDecision(t, obs, ids[i])
		assert.Equal(t, w.kind, dec.Outcome.Kind, msgs[i])
		assert.Equal(t, w.cause, dec.Outcome.Cause, msgs[i])
	}
}

// F19 in a batch's first pass: members whose work a resource deferred to its Finish did not reach the
// store. When that Finish loses the batch to the store every time (no health probe: the handlers are the
// probe), the gate's backoff doubles per closing as it does for a message alone (100, 200, 400 ms…); the
// deferred members' provisional outcomes must not count as getting past the store, which would keep the
// consumer retrying a down store every 100 ms.
func TestBatch_F19_FirstPassLostToTheStoreBacksOffAsAMessageAlone(t *testing.T) {
	passes := 0
	h := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		b := ibatch.FromContext[consumer.Outcome, string](ctx)
		if b.Resource("tx") == nil {
			passes++
			r := &sharedResource{}
			if passes <= 4 {
				r.err = fmt.Errorf("begin: connection refused: %w", ibatch.ErrStoreUnavailable)
			}
			require.NoError(t, b.Attach("tx", r))
		}
		b.Depend("tx", b.Member())
		return consumer.Processed(), nil // deferred to Finish: nothing reached the store yet
	}
	cfg := validConfig()
	cfg.BatchSize = 8
	cfg.OutageWait = 30 * time.Second
	_, fp := newConsumer(t, cfg, consumer.HandlerFunc(h))
	start := time.Now()
	res, _ := fp.deliver(t, "ORDER", orderMsg("a"), orderMsg("b"))
	assert.Equal(t, rmq.ConsumeSuccess, res)
	assert.Equal(t, 5, passes)
	assert.GreaterOrEqual(t, time.Since(start), 1400*time.Millisecond, "backoffs of 100, 200, 400 and 800 ms")
}
