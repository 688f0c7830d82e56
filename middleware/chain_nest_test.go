package middleware_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/pending"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// txCounter is a dedup.Handle handler that counts its runs and whether it got the dedup transaction.
type txCounter struct {
	runs int
	tx   bool
}

func (c *txCounter) handler() consumer.Handler {
	return dedup.Handle(func(_ context.Context, tx *sqlx.Tx, _ *consumer.Delivery) (consumer.Outcome, error) {
		c.runs++
		c.tx = tx != nil
		return consumer.Processed(), nil
	})
}

func newEventID(t *testing.T) middleware.Middleware {
	t.Helper()
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	return eventID
}

// An inner Chain lacking what only the outer Chain provides (EventID, Classify) is refused by consumer.New
// alone, with the fix, and accepted once an outer Chain completes it: the composed chain runs the handler
// in the dedup transaction, committed once.
func TestChain_IncompleteInnerChainIsCompletedByTheOuterOne(t *testing.T) {
	f, dedupMW := newDedup(t)
	var c txCounter
	inner := testenv.Must(middleware.Chain(c.handler(), dedupMW))

	err := newConsumer(t, inner)
	require.ErrorIs(t, err, middleware.ErrChainOrder)
	assert.Equal(t, "consumer.New: handler: middleware.Dedup (position 1) needs middleware.EventID before it: add middleware.EventID before Dedup", err.Error())

	var wrapped consumer.Handler // what the outer chain's innermost middleware wraps
	innermost := middleware.Func(func(next consumer.Handler) consumer.Handler { wrapped = next; return next })
	h := testenv.Must(middleware.Chain(inner, middleware.Recover(nil), middleware.Classify(), newEventID(t), innermost))
	require.NoError(t, pending.Refused(h), "consumer.New accepts the composed chain")
	require.NoError(t, pending.Refused(wrapped), "the outer chain wraps the inner chain itself, not its pending layer")

	o, err := h.Handle(context.Background(), delivery("ORDER", "", map[string]string{"EVENT_ID": "e-1"}))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, txCounter{runs: 1, tx: true}, c)
	begins, commits, rollbacks := f.counts()
	assert.Equal(t, [3]int{1, 1, 0}, [3]int{begins, commits, rollbacks})
}

// A chain still incomplete after an outer Chain stays pending, with positions counted over both lists;
// the next Chain around it completes it.
func TestChain_StillIncompleteStaysPendingUntilCompleted(t *testing.T) {
	f, dedupMW := newDedup(t)
	var c txCounter
	mid := testenv.Must(middleware.Chain(testenv.Must(middleware.Chain(c.handler(), dedupMW)), newEventID(t)))

	err := newConsumer(t, mid)
	require.ErrorIs(t, err, middleware.ErrChainOrder)
	assert.Contains(t, err.Error(), "consumer.New: handler: middleware.Dedup (position 2, in the inner chain) needs middleware.Classify in the chain")

	h := testenv.Must(middleware.Chain(mid, middleware.Recover(nil), middleware.Classify()))
	require.NoError(t, pending.Refused(h))
	o, err := h.Handle(context.Background(), delivery("ORDER", "", map[string]string{"EVENT_ID": "e-1"}))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind)
	assert.Equal(t, 1, c.runs)
	_, commits, _ := f.counts()
	assert.Equal(t, 1, commits)
}

// A router's branch built with Chain may leave EventID and Classify to the chain around the router:
// consumer.New cannot see the branch, and the branch runs on a real message instead of dead-lettering it.
func TestChain_PendingBranchInARouterRunsOnARealMessage(t *testing.T) {
	f, dedupMW := newDedup(t)
	var c txCounter
	branches := map[string]consumer.Handler{"ORDER": testenv.Must(middleware.Chain(c.handler(), dedupMW))}
	require.ErrorIs(t, pending.Refused(branches["ORDER"]), middleware.ErrChainOrder, "the branch alone is incomplete")
	router := func(ctx context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		return branches[d.Topic].Handle(ctx, d)
	}
	h := testenv.Must(middleware.Chain(consumer.HandlerFunc(router), middleware.Recover(nil), middleware.Classify(), newEventID(t)))
	require.NoError(t, pending.Refused(h))

	o, err := h.Handle(context.Background(), delivery("ORDER", "", map[string]string{"EVENT_ID": "e-1"}))

	require.NoError(t, err)
	assert.Equal(t, consumer.KindProcessed, o.Kind, "not dead-lettered: %s", o.Reason)
	assert.Equal(t, txCounter{runs: 1, tx: true}, c)
	_, commits, _ := f.counts()
	assert.Equal(t, 1, commits)
}

// Version inside, Dedup outside is the right order across the two chains; the reverse cannot be mended
// by any outer chain and is refused, as is a middleware in both chains.
func TestChain_InnerAndOuterAreCheckedAsOneChain(t *testing.T) {
	_, dedupMW := newDedup(t)
	version, err := middleware.Version(nil, middleware.VersionConfig{AggregateType: "order",
		Load: func(context.Context, *sqlx.Tx, string) (int64, error) { return 0, nil }})
	require.NoError(t, err)
	eventID := newEventID(t)

	accepted := testenv.Must(middleware.Chain(testenv.Must(middleware.Chain(txPlain, version)), middleware.Recover(nil), middleware.Classify(), eventID, dedupMW))
	require.NoError(t, pending.Refused(accepted), "Dedup outside, Version inside")

	for name, tc := range map[string]struct {
		build func() (consumer.Handler, error)
		want  string
	}{
		"Dedup in both": {func() (consumer.Handler, error) {
			return middleware.Chain(testenv.Must(middleware.Chain(txPlain, dedupMW)), middleware.Classify(), eventID, dedupMW)
		}, "middleware.Dedup (position 4, in the inner chain) repeats middleware.Dedup (position 3): keep one of them"},
		"Version outside Dedup": {func() (consumer.Handler, error) {
			return middleware.Chain(testenv.Must(middleware.Chain(txPlain, dedupMW)), middleware.Classify(), eventID, version)
		}, "middleware.Version (position 3) needs middleware.Dedup before it: move Dedup before Version"},
		"Timeout outside an inner Recover": {func() (consumer.Handler, error) {
			return middleware.Chain(testenv.Must(middleware.Chain(txPlain, middleware.Recover(nil), dedupMW)), middleware.Timeout(time.Second), middleware.Classify(), eventID)
		}, "middleware.Timeout (position 1) must be inside middleware.Recover (position 4, in the inner chain): move Recover before Timeout"},
		"EventID inside Dedup, one list": {func() (consumer.Handler, error) {
			return middleware.Chain(txPlain, middleware.Classify(), dedupMW, eventID)
		}, "middleware.Dedup (position 2) needs middleware.EventID before it: move EventID before Dedup"},
	} {
		t.Run(name, func(t *testing.T) {
			h, err := tc.build()

			require.ErrorIs(t, err, middleware.ErrChainOrder)
			assert.Equal(t, tc.want, err.Error())
			assert.Nil(t, h, "refused for good where it is built, not pending")
		})
	}
}

// A handler of the user's that refuses itself for a branch's incomplete chain, wrapping that chain's
// error (a router built of Chains), stays refused in an outer Chain: the outer Chain completes only the
// pending chains it was given, never one found inside another handler's error, which would replace the
// router by its branch.
func TestChain_ARefusalWrappingAnIncompleteChainStaysRefused(t *testing.T) {
	_, dedupMW := newDedup(t)
	var c txCounter
	branch := testenv.Must(middleware.Chain(c.handler(), dedupMW))
	router := func(branches ...consumer.Handler) consumer.Handler {
		for i, b := range branches {
			if err := pending.Refused(b); err != nil {
				return pending.Refuse[consumer.Delivery](fmt.Errorf("router: branch %d: %w", i+1, err), consumer.DeadLetter)
			}
		}
		return branches[0]
	}

	for name, h := range map[string]consumer.Handler{
		"Refuse":  router(consumer.HandlerFunc(plain), branch),
		"Pending": pending.Wrap(consumer.HandlerFunc(plain), fmt.Errorf("router: %w", pending.Refused(branch))),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := middleware.Chain(h, middleware.Recover(nil), middleware.Classify(), newEventID(t))

			require.ErrorIs(t, err, middleware.ErrChainOrder)
			assert.Contains(t, err.Error(), "router: ")
		})
	}
}
