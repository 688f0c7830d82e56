package middleware_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
)

// versionRig runs Version with a fake loader (the stored version of every aggregate is stored) in front of
// a handler that counts its calls; the context carries a stand-in transaction, which neither touches.
type versionRig struct {
	stored  int64
	loads   []string // aggregate IDs the loader was asked for
	calls   int
	handler consumer.Handler
}

func newVersionRig(stored int64) *versionRig {
	r := &versionRig{stored: stored}
	r.handler = consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		r.calls++
		return consumer.Processed(), nil
	})
	return r
}

func (r *versionRig) load(_ context.Context, tx *sqlx.Tx, aggregateID string) (int64, error) {
	if tx == nil {
		return 0, errors.New("no transaction given to the loader")
	}
	r.loads = append(r.loads, aggregateID)
	return r.stored, nil
}

// run builds Version from cfg (AggregateType "order" and the rig's loader unless set) and runs d through it.
func (r *versionRig) run(t *testing.T, cfg middleware.VersionConfig, d *consumer.Delivery) (consumer.Outcome, error) {
	t.Helper()
	if cfg.AggregateType == "" {
		cfg.AggregateType = "order"
	}
	if cfg.Load == nil {
		cfg.Load = r.load
	}
	mw, err := middleware.Version(nil, cfg)
	require.NoError(t, err)
	return mw.Wrap(r.handler).Handle(testenv.WithTx(context.Background(), &sqlx.Tx{}), d)
}

// event is an OrderPaid delivery of aggregate o-1 at version (omitted when ""), on delivery attempt+1 of 17.
func event(version string, attempt int) *consumer.Delivery {
	props := map[string]string{"EVENT_ID": "e-1", "EVENT_TYPE": "OrderPaid", "AGGREGATE_ID": "o-1"}
	if version != "" {
		props["AGGREGATE_VERSION"] = version
	}
	d := delivery("ORDER", `{}`, props)
	d.EventType, d.AggregateID = "OrderPaid", "o-1" // what EventID would have set
	d.Attempt, d.MaxAttempts = attempt, 16
	return d
}

func TestVersion_S7_OlderOrEqualVersionIsStaleAndSkipsTheHandler(t *testing.T) {
	for _, v := range []string{"5", "7"} {
		r := newVersionRig(7)
		d := event(v, 0)
		o, err := r.run(t, middleware.VersionConfig{}, d)
		require.NoError(t, err)
		assert.Equal(t, consumer.Stale("aggregate order o-1: event version "+v+" ≤ stored 7"), o)
		assert.Zero(t, r.calls, "a stale event never reaches the handler")
		assert.Equal(t, []string{"o-1"}, r.loads)
		assert.Equal(t, "o-1", d.AggregateID)
		assert.Equal(t, map[string]int64{"5": 5, "7": 7}[v], d.Version)
	}
}

func TestVersion_NextVersionRunsTheHandler(t *testing.T) {
	r := newVersionRig(6)
	d := event("7", 0)
	o, err := r.run(t, middleware.VersionConfig{}, d)
	require.NoError(t, err)
	assert.Equal(t, consumer.Processed(), o)
	assert.Equal(t, 1, r.calls)
	assert.Equal(t, int64(7), d.Version)

	r = newVersionRig(0) // a new aggregate: its first version is 1
	o, err = r.run(t, middleware.VersionConfig{}, event("1", 0))
	require.NoError(t, err)
	assert.Equal(t, consumer.Processed(), o)
	assert.Equal(t, 1, r.calls)
}

func TestVersion_HandlerErrorsAndOutcomesPassThrough(t *testing.T) {
	r := newVersionRig(6)
	boom := errors.New("boom")
	r.handler = consumer.HandlerFunc(func(context.Context, *consumer.Delivery) (consumer.Outcome, error) { return consumer.Outcome{}, boom })
	_, err := r.run(t, middleware.VersionConfig{}, event("7", 0))
	assert.ErrorIs(t, err, boom)

	failing := func(context.Context, *sqlx.Tx, string) (int64, error) { return 0, boom }
	r = newVersionRig(6)
	_, err = r.run(t, middleware.VersionConfig{Load: failing}, event("7", 0))
	assert.ErrorIs(t, err, boom, "the loader's error is returned (a retry)")
	assert.Zero(t, r.calls)
}

// A gap waits GapRetries deliveries (retried at GapDelayLevel), then the default policy dead-letters it.
func TestVersion_GapIsRetriedThenDeadLettered(t *testing.T) {
	for attempt := 0; attempt < 3; attempt++ {
		r := newVersionRig(6)
		o, err := r.run(t, middleware.VersionConfig{}, event("9", attempt))
		require.NoError(t, err)
		assert.Equal(t, consumer.KindRetry, o.Kind, "attempt %d", attempt)
		assert.Equal(t, 2, o.DelayLevel, "the default GapDelayLevel")
		assert.Contains(t, o.Reason, "version gap: aggregate order o-1: event version 9, stored 6 (versions 7..8 missing)")
		assert.Zero(t, r.calls)
	}
	r := newVersionRig(6)
	o, err := r.run(t, middleware.VersionConfig{}, event("9", 3))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Equal(t, causelabel.VersionGap, o.Cause)
	assert.Equal(t, "version gap: aggregate order o-1: event version 9, stored 6 (versions 7..8 missing) on delivery 4", o.Reason)
	assert.Zero(t, r.calls)

	r = newVersionRig(6)
	o, err = r.run(t, middleware.VersionConfig{GapRetries: 1, GapDelayLevel: 5}, event("8", 0))
	require.NoError(t, err)
	assert.Equal(t, consumer.Retry(5, o.Reason), o, "GapDelayLevel is the retry's delay level")
}

func TestVersion_GapApplyRunsTheHandlerOnceTheGapHasWaited(t *testing.T) {
	r := newVersionRig(6)
	o, err := r.run(t, middleware.VersionConfig{OnGap: middleware.GapApply, GapRetries: 2}, event("9", 1))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindRetry, o.Kind)
	assert.Zero(t, r.calls)

	o, err = r.run(t, middleware.VersionConfig{OnGap: middleware.GapApply, GapRetries: 2}, event("9", 2))
	require.NoError(t, err)
	assert.Equal(t, consumer.Processed(), o)
	assert.Equal(t, 1, r.calls)

	r = newVersionRig(5)
	o, err = r.run(t, middleware.VersionConfig{OnGap: middleware.GapApply, GapRetries: middleware.NoGapRetries}, event("7", 0))
	require.NoError(t, err)
	assert.Equal(t, consumer.Processed(), o, "NoGapRetries applies the policy on the first delivery")
	assert.Equal(t, 1, r.calls)

	r = newVersionRig(5)
	o, err = r.run(t, middleware.VersionConfig{GapRetries: middleware.NoGapRetries}, event("7", 0))
	require.NoError(t, err)
	assert.Equal(t, causelabel.VersionGap, o.Cause, "NoGapRetries with GapDeadLetter dead-letters at once")
}

// On the group's last delivery a gap follows OnGap even with retries left: a retry there would reach the
// DLQ through Classify as "retries exhausted", hiding the gap.
func TestVersion_GapOnTheLastDeliveryFollowsOnGap(t *testing.T) {
	last := func() *consumer.Delivery {
		d := event("9", 2)
		d.MaxAttempts = 2
		return d
	}
	r := newVersionRig(6)
	mw, err := middleware.Version(nil, middleware.VersionConfig{AggregateType: "order", Load: r.load, GapRetries: 10})
	require.NoError(t, err)
	h := middleware.Classify().Wrap(mw.Wrap(r.handler)) // by hand: Chain refuses Version without Dedup; the context has the tx
	o, err := h.Handle(testenv.WithTx(context.Background(), &sqlx.Tx{}), last())
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Equal(t, causelabel.VersionGap, o.Cause, "not exhausted")

	o, err = r.run(t, middleware.VersionConfig{GapRetries: 10, OnGap: middleware.GapApply}, last())
	require.NoError(t, err)
	assert.Equal(t, consumer.Processed(), o)
}

func TestVersion_MissingVersionOrAggregateID(t *testing.T) {
	noID := event("3", 0)
	noID.AggregateID = ""
	for name, d := range map[string]*consumer.Delivery{"no version": event("", 0), "no aggregate ID": noID} {
		r := newVersionRig(2)
		o, err := r.run(t, middleware.VersionConfig{}, d)
		require.NoError(t, err, name)
		assert.Equal(t, consumer.Processed(), o, "%s: unchecked without Require", name)
		assert.Equal(t, 1, r.calls, name)
		assert.Empty(t, r.loads, name)
	}

	r := newVersionRig(2)
	o, err := r.run(t, middleware.VersionConfig{Require: true}, event("", 0))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Equal(t, causelabel.Permanent, o.Cause)
	assert.Equal(t, "aggregate order o-1: no version (property AGGREGATE_VERSION: not present)", o.Reason)
	assert.Zero(t, r.calls)

	d := event("3", 0)
	d.AggregateID = ""
	o, err = r.run(t, middleware.VersionConfig{Require: true}, d)
	require.NoError(t, err)
	assert.Equal(t, consumer.KindDeadLetter, o.Kind)
	assert.Equal(t, "aggregate order: no aggregate ID (Delivery.AggregateID: not present)", o.Reason)
	assert.Zero(t, r.calls)
}

func TestVersion_VersionNotAnIntegerIsDeadLettered(t *testing.T) {
	for _, v := range []string{"abc", "0", "-3", "1.5", "99999999999999999999"} {
		r := newVersionRig(2)
		o, err := r.run(t, middleware.VersionConfig{}, event(v, 0))
		require.NoError(t, err, v)
		assert.Equal(t, consumer.KindDeadLetter, o.Kind, "%s: even without Require", v)
		assert.Equal(t, causelabel.Permanent, o.Cause, v)
		assert.Equal(t, `aggregate order o-1: event version "`+v+`" is not an integer ≥ 1`, o.Reason)
		assert.Zero(t, r.calls, v)
	}
}

func TestVersion_EventTypesFilter(t *testing.T) {
	cfg := middleware.VersionConfig{EventTypes: []string{"OrderCancelled"}}
	r := newVersionRig(7)
	d := event("5", 0)
	o, err := r.run(t, cfg, d)
	require.NoError(t, err)
	assert.Equal(t, consumer.Processed(), o, "OrderPaid is not checked")
	assert.Empty(t, r.loads)
	assert.Zero(t, d.Version, "an unchecked event is left untouched")

	cfg.EventTypes = append(cfg.EventTypes, "OrderPaid")
	o, err = r.run(t, cfg, event("5", 0))
	require.NoError(t, err)
	assert.Equal(t, consumer.KindStale, o.Kind)
}

func TestVersion_CustomExtractors(t *testing.T) {
	r := newVersionRig(1)
	d := delivery("ORDER", `{"orderNo":"o-9","version":2}`, map[string]string{"EVENT_ID": "e-9"})
	o, err := r.run(t, middleware.VersionConfig{
		AggregateExtractors: []middleware.Extractor{middleware.FromJSONField("orderNo")},
		VersionExtractors:   []middleware.Extractor{middleware.FromJSONField("version")},
	}, d)
	require.NoError(t, err)
	assert.Equal(t, consumer.Processed(), o)
	assert.Equal(t, []string{"o-9"}, r.loads)
	assert.Equal(t, "o-9", d.AggregateID)
	assert.Equal(t, int64(2), d.Version)
}

func TestVersion_WithoutTheDedupTransactionSaysWhereToPutIt(t *testing.T) {
	r := newVersionRig(1)
	mw, err := middleware.Version(nil, middleware.VersionConfig{AggregateType: "order", Load: r.load})
	require.NoError(t, err)
	o, err := mw.Wrap(r.handler).Handle(context.Background(), event("2", 0))
	require.ErrorIs(t, err, dedup.ErrNoTx)
	assert.Contains(t, err.Error(), "put middleware.Version after middleware.Dedup")
	assert.Equal(t, consumer.Kind(0), o.Kind)
	assert.Zero(t, r.calls)
}

func TestVersion_ConfigErrorsNameTheField(t *testing.T) {
	load := func(context.Context, *sqlx.Tx, string) (int64, error) { return 0, nil }
	for _, c := range []struct {
		cfg  middleware.VersionConfig
		want string
	}{
		{middleware.VersionConfig{Load: load}, "AggregateType"},
		{middleware.VersionConfig{AggregateType: "order items", Load: load}, "AggregateType"},
		{middleware.VersionConfig{AggregateType: string(make([]byte, 65)), Load: load}, "AggregateType"},
		{middleware.VersionConfig{AggregateType: "order"}, "store is nil"},
		{middleware.VersionConfig{AggregateType: "order", Load: load, GapRetries: -2}, "GapRetries"},
		{middleware.VersionConfig{AggregateType: "order", Load: load, GapDelayLevel: 19}, "GapDelayLevel"},
		{middleware.VersionConfig{AggregateType: "order", Load: load, GapDelayLevel: -1}, "GapDelayLevel"},
		{middleware.VersionConfig{AggregateType: "order", Load: load, OnGap: 7}, "OnGap"},
		{middleware.VersionConfig{AggregateType: "order", Load: load,
			AggregateExtractors: []middleware.Extractor{{Name: "x"}}}, "AggregateExtractors: extractor 0"},
		{middleware.VersionConfig{AggregateType: "order", Load: load,
			VersionExtractors: []middleware.Extractor{middleware.FromProperty("V"), {Extract: func(*consumer.Delivery) (string, error) { return "", nil }}}},
			"VersionExtractors: extractor 1"},
	} {
		_, err := middleware.Version(nil, c.cfg)
		require.Error(t, err, c.want)
		assert.Contains(t, err.Error(), c.want)
	}
	_, err := middleware.Version(nil, middleware.VersionConfig{AggregateType: "order_v2", Load: load, GapRetries: middleware.NoGapRetries, GapDelayLevel: 18})
	assert.NoError(t, err, "the limits themselves are valid")
	_, err = middleware.Version(nil, middleware.VersionConfig{AggregateType: "order", Load: load, GapDelayLevel: 1})
	assert.NoError(t, err, "delay level 1 is the lowest valid one")
}
