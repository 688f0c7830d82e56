package main

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/outbox"
)

// correctFollowUps is what a correct run leaves of plan's paid orders' follow-ups: per paid order a sent
// LoyaltyPointsCredited row and a sent notification row, one credit, the planned points, and each
// notification received once (the first key twice: a redelivery the receiver dedups).
func correctFollowUps(plan shop.DomainPlan) followUps {
	paid := plan.Events[shop.EventOrderPaid]
	f := followUps{
		rows: map[string]map[string]int{
			outboxsql.KindMessage: {outboxsql.StatusSent: paid}, outboxsql.KindEffect: {outboxsql.StatusSent: paid}},
		loyalty:  shop.LoyaltyEffects{Credits: paid, Points: maps.Clone(plan.Points)},
		received: receiverCounts{Calls: map[string]int{}, Applied: map[string]int{}},
	}
	for _, no := range plan.Paid {
		k := "g/" + no + "-paid/" + effectNotify
		f.notifyKeys = append(f.notifyKeys, k)
		f.received.Calls[k], f.received.Applied[k] = 1, 1
	}
	f.received.Calls[f.notifyKeys[0]] = 2
	return f
}

// A notification called twice for one key and applied once is what at-least-once delivery with an
// idempotency key means: not a problem.
func TestDemoFollowUps_CorrectRunWithARepeatedNotificationPasses(t *testing.T) {
	r, d, comp := verifyWorld(t)

	assert.Empty(t, r.followUpProblems(d.followUps))
	assert.True(t, r.complete(d, comp))
}

func TestDemoFollowUps_UnsentOutboxRowFailsTheVerdict(t *testing.T) {
	r, d, comp := verifyWorld(t)
	d.followUps.rows[outboxsql.KindMessage] = map[string]int{outboxsql.StatusSent: 4, outboxsql.StatusParked: 1}

	assert.Contains(t, r.problems(d, comp), "outbox: 1 LoyaltyPointsCredited rows not sent (0 pending, 1 parked)")
	assert.False(t, r.complete(d, comp), "the demo waits for it")
}

func TestDemoFollowUps_MissingOutboxRowFailsTheVerdict(t *testing.T) {
	r, d, comp := verifyWorld(t)
	d.followUps.rows[outboxsql.KindEffect] = map[string]int{outboxsql.StatusSent: 4}

	assert.Contains(t, r.problems(d, comp), "outbox: 4 notification rows for 5 OrderPaid")
}

// An OrderPaid's LoyaltyPointsCredited applied twice (e.g. a redelivery that passed the dedup) shows as
// one credit too many, or as an account's points counted twice.
func TestDemoFollowUps_LoyaltyAppliedTwiceFailsTheVerdict(t *testing.T) {
	r, d, comp := verifyWorld(t)
	d.followUps.loyalty.Credits++
	acct := "r-acct-1" // the paid orders are the odd ones: account 1 of 2
	want := r.plan.Points[acct]
	require.Positive(t, want)
	d.followUps.loyalty.Points[acct] = 2 * want

	p := r.problems(d, comp)

	assert.Contains(t, p, "loyalty: 6 credits for 5 OrderPaid")
	assert.Contains(t, p, "loyalty points of r-acct-1: "+strconv.FormatInt(2*want, 10)+", want "+strconv.FormatInt(want, 10))
}

func TestDemoFollowUps_LoyaltyNotAppliedFailsTheVerdict(t *testing.T) {
	r, d, comp := verifyWorld(t)
	d.followUps.loyalty.Credits--

	assert.Contains(t, r.problems(d, comp), "loyalty: 4 credits for 5 OrderPaid")
	assert.False(t, r.complete(d, comp))
}

func TestDemoFollowUps_NotificationNeverReceivedFailsTheVerdict(t *testing.T) {
	r, d, comp := verifyWorld(t)
	lost := d.followUps.notifyKeys[2]
	delete(d.followUps.received.Calls, lost)
	delete(d.followUps.received.Applied, lost)

	assert.Contains(t, r.problems(d, comp), "notifications: 1 of 5 never received (first "+lost+")")
	assert.False(t, r.complete(d, comp))
}

func TestDemoFollowUps_NotificationAppliedTwiceForOneKeyFailsTheVerdict(t *testing.T) {
	r, d, comp := verifyWorld(t)
	k := d.followUps.notifyKeys[0]
	d.followUps.received.Applied[k] = 2

	assert.Contains(t, r.problems(d, comp), "notification "+k+" applied 2 times")
}

func TestDemoFollowUps_UnreachableReceiverFailsTheVerdict(t *testing.T) {
	r, d, comp := verifyWorld(t)
	d.followUps.receiverErr = "notify receiver: connection refused"

	assert.Contains(t, r.problems(d, comp), "notifications: notify receiver: connection refused")
}

// The receiver applies a key's first call only and counts every call; a call without a key is refused.
func TestNotifyReceiver_AppliesOncePerIdempotencyKeyAndCountsEveryCall(t *testing.T) {
	srv := httptest.NewServer(newReceiver())
	defer srv.Close()
	effect := notifyEffect(srv.Client(), srv.URL+"/notify")
	for _, k := range []string{"k1", "k1", "k2"} {
		require.NoError(t, effect(t.Context(), outbox.Effect{Name: effectNotify, IdempotencyKey: k, Payload: []byte(`{}`)}))
	}
	require.Error(t, effect(t.Context(), outbox.Effect{Name: effectNotify, Payload: []byte(`{}`)}), "no key: 400, a failure to retry")

	c, err := fetchReceiverCounts(t.Context(), strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)

	assert.Equal(t, map[string]int{"k1": 2, "k2": 1}, c.Calls)
	assert.Equal(t, map[string]int{"k1": 1, "k2": 1}, c.Applied)
}

// A receiver answering an error makes the effect fail (the relay retries it), never pass.
func TestNotifyEffect_ErrorAnswerIsAFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	err := notifyEffect(srv.Client(), srv.URL)(t.Context(), outbox.Effect{IdempotencyKey: "k"})

	assert.ErrorContains(t, err, "answered 503")
}

func TestNotifyReceiver_RefusesANonLoopbackAddress(t *testing.T) {
	assert.ErrorContains(t, serveReceiver(t.Context(), "0.0.0.0:0"), "loopback")
}
