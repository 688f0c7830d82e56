package chaos_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/tools/chaos"
)

func TestLine_OkAndFailedCarryTheFigures(t *testing.T) {
	ok := chaos.Result{Scenario: "mariadb-stop", Events: 1800,
		Counts:  chaos.Counts{Orders: 1800, Letters: []chaos.Letter{{EventID: "p"}}},
		Figures: chaos.Figures{Duplicates: 200, Paused: 61200 * time.Millisecond}, Elapsed: 95 * time.Second}
	assert.Equal(t, "chaos: ok scenario=mariadb-stop events=1800 effects=1800 dlq=1 paused=61.2s duplicates=200 elapsed=95.0s", ok.Line())

	failed := ok
	failed.Figures.Paused = 0
	failed.Problems = []string{"a", "b"}
	assert.Equal(t, "chaos: FAILED scenario=mariadb-stop events=1800 effects=1800 dlq=1 paused=0.0s duplicates=200 elapsed=95.0s: a; b", failed.Line())
	assert.False(t, failed.OK())
}

func TestProblems_OnlyThePoisonLetterAndOneEffectPerEvent(t *testing.T) {
	c := &chaos.Checker{Want: chaos.Expectation{Events: 3, PoisonEventID: "run-poison"}}
	good := chaos.Counts{Orders: 3, Reservations: 3, Rows: 3, Letters: []chaos.Letter{{EventID: "run-poison"}}}
	assert.Empty(t, c.Problems(good))

	extra := good
	extra.Orders, extra.Rows = 2, 2
	extra.Letters = append(extra.Letters, chaos.Letter{EventID: "run-e1", Reason: "retries exhausted"})
	problems := c.Problems(extra)
	require.Len(t, problems, 3)
	assert.Contains(t, problems[0], "2 orders and 3 reservations for 3 events")
	assert.Contains(t, problems[1], "2 rows of the group for 3 events")
	assert.Contains(t, problems[2], `DLQ holds 2 letters, want only the poison run-poison; 1 others, e.g. run-e1: "retries exhausted"`)

	missing := good
	missing.Letters = nil
	assert.Equal(t, []string{"DLQ holds 0 letters, want only the poison run-poison (missing)"}, c.Problems(missing))
}

func TestSelect_NamesInCatalogueOrderAndUnknownNames(t *testing.T) {
	all := chaos.Scenarios(chaos.Full())
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"mariadb-restart", "broker-restart", "consumer-kill", "mariadb-readonly", "mariadb-stop",
		"effects-consumer-kill", "effects-broker-stop", "effects-receiver-down"}, names)
	got, err := chaos.Select(all, "mariadb-stop,consumer-kill")
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "mariadb-stop", got[0].Name)
	_, err = chaos.Select(all, "disk-full")
	assert.ErrorContains(t, err, `scenario "disk-full": unknown; known: mariadb-restart, broker-restart`)
}

// TestSampler_PauseIsTheLongestSlotSummedOverItsRestarts scrapes two processes of slot 0 (before and after a
// restart) and one of slot 1: slot 0 paused 3 s + 4 s, slot 1 5 s, so the group paused at least 7 s.
// Duplicates add up over every process; series of other groups are ignored.
func TestSampler_PauseIsTheLongestSlotSummedOverItsRestarts(t *testing.T) {
	serve := func(paused string, dups float64) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "# TYPE rmqguard_duplicates_total counter\nrmqguard_duplicates_total{group=\"g\",topic=\"T\"} %g\n", dups)
			fmt.Fprintf(w, "rmqguard_duplicates_total{group=\"other\",topic=\"T\"} 100\n")
			if paused != "" {
				fmt.Fprintf(w, "# TYPE rmqguard_consumption_paused_seconds_total counter\nrmqguard_consumption_paused_seconds_total{group=\"g\"} %s\n", paused)
				fmt.Fprintf(w, "# TYPE rmqguard_consumption_paused gauge\nrmqguard_consumption_paused{group=\"g\"} 0\n")
			}
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/metrics"
	}
	targets := []chaos.Target{{Key: "0/0", Slot: 0, MetricsURL: serve("3", 1)}, {Key: "0/1", Slot: 0, MetricsURL: serve("4", 2)},
		{Key: "1/0", Slot: 1, MetricsURL: serve("5", 4)}}
	f := sampleOnce(t, chaos.NewSampler("g", func() []chaos.Target { return targets }))
	assert.Equal(t, 7*time.Second, f.Paused)
	assert.Equal(t, 7.0, f.Duplicates)

	without := sampleOnce(t, chaos.NewSampler("g", func() []chaos.Target { return []chaos.Target{{Key: "0/0", MetricsURL: serve("", 1)}} }))
	assert.Zero(t, without.Paused, "a group that never paused has no pause series")
	assert.Contains(t, chaos.Result{Figures: without}.Line(), " paused=0.0s ")
}

// sampleOnce runs s until its first round has seen a duplicate count, and returns its figures.
func sampleOnce(t *testing.T, s *chaos.Sampler) chaos.Figures {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx, 10*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return s.Figures().Duplicates > 0 }, 5*time.Second, 10*time.Millisecond)
	return s.Figures()
}

// TestProblems_EffectsScenarioNamesLostRowsCreditsAndNotificationsNotOnce: the verdict of an effects
// scenario fails on an outbox row not sent (pending or parked), a missing loyalty credit, and a notification
// key applied other than once, and its line carries the follow-ups' figures.
func TestProblems_EffectsScenarioNamesLostRowsCreditsAndNotificationsNotOnce(t *testing.T) {
	plan, err := shop.DomainWorkload{RunID: "r", Topic: "T", Orders: 4, PaidShare: 1, Accounts: 2, Skus: 2, Poison: true}.Plan()
	require.NoError(t, err)
	c := &chaos.Checker{Want: chaos.Expectation{Events: plan.TotalEvents(), PoisonEventID: plan.PoisonEventID, Domain: &plan}}
	dom := shop.DomainEffects{Orders: 4, ByStatus: map[string]int{shop.StatusPaid: 4}, Reservations: 4, Payments: 4,
		OnHand: plan.OnHand, Balances: plan.Balances}
	good := chaos.Counts{Rows: plan.TotalEvents(), Letters: []chaos.Letter{{EventID: plan.PoisonEventID}}, Domain: dom,
		FollowUps: chaos.FollowUps{Rows: map[string]map[string]int{outboxsql.KindMessage: {outboxsql.StatusSent: 4}, outboxsql.KindEffect: {outboxsql.StatusSent: 4}},
			Credits: 4, Keys: 4, Received: 4, Calls: 5}}
	require.Empty(t, c.Problems(good))
	res := chaos.Result{Scenario: "effects-receiver-down", Events: plan.TotalEvents(), Counts: good, Elapsed: time.Second}
	assert.Contains(t, res.Line(), " outbox=8/8 loyalty=4 notified=4/4 calls=5 elapsed=1.0s")

	bad := good
	bad.FollowUps.Rows = map[string]map[string]int{outboxsql.KindMessage: {outboxsql.StatusSent: 2, outboxsql.StatusPending: 1, outboxsql.StatusParked: 1},
		outboxsql.KindEffect: {outboxsql.StatusSent: 4}}
	bad.FollowUps.Credits, bad.FollowUps.NotOnce = 2, 1
	assert.Equal(t, []string{
		"outbox: 2 LoyaltyPointsCredited rows not sent (1 pending, 1 parked)",
		"loyalty: 2 credits for 4 OrderPaid, 0 accounts with other points than planned",
		"notifications: 4 of 4 keys received, 1 applied other than once",
	}, c.Problems(bad))
}
