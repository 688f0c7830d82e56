package main

import (
	"context"
	"fmt"
	"sort"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
)

// followUps is what the demo found of the paid orders' follow-ups (followups.go): the run's outbox rows,
// the loyalty group's credits and what the notification receiver got.
type followUps struct {
	// rows counts the run's outbox rows of each kind (outboxsql.KindMessage, outboxsql.KindEffect) per status.
	rows map[string]map[string]int
	// notifyKeys are the idempotency keys of the run's notification rows.
	notifyKeys []string
	loyalty    shop.LoyaltyEffects
	// received is the receiver's counts; receiverErr why they could not be read ("" when they were).
	received    receiverCounts
	receiverErr string
}

// observeFollowUps reads the follow-ups of the run whose event IDs start with prefix, recorded by group.
func observeFollowUps(ctx context.Context, db *sqlx.DB, group, prefix, notifyAddr string) (followUps, error) {
	f := followUps{rows: map[string]map[string]int{outboxsql.KindMessage: {}, outboxsql.KindEffect: {}}}
	like := shop.PrefixPattern(prefix)
	var rows []struct {
		Kind   string `db:"kind"`
		Status string `db:"status"`
		N      int    `db:"n"`
	}
	if err := db.SelectContext(ctx, &rows, `SELECT kind, status, COUNT(*) AS n FROM `+outboxsql.Table+`
		WHERE scope = ? AND source_event_id LIKE ? GROUP BY kind, status`, group, like); err != nil {
		return f, fmt.Errorf("outbox rows of the run: %w", err)
	}
	for _, r := range rows {
		if f.rows[r.Kind] == nil {
			f.rows[r.Kind] = map[string]int{}
		}
		f.rows[r.Kind][r.Status] = r.N
	}
	if err := db.SelectContext(ctx, &f.notifyKeys, `SELECT event_id FROM `+outboxsql.Table+`
		WHERE scope = ? AND source_event_id LIKE ? AND kind = ? AND name = ? ORDER BY id`,
		group, like, outboxsql.KindEffect, effectNotify); err != nil {
		return f, fmt.Errorf("notification rows of the run: %w", err)
	}
	var err error
	if f.loyalty, err = shop.RunLoyalty(ctx, db, prefix); err != nil {
		return f, err
	}
	if f.received, err = fetchReceiverCounts(ctx, notifyAddr); err != nil {
		f.receiverErr = err.Error()
	}
	return f, nil
}

// total is the number of rows of kind, whatever their status.
func (f followUps) total(kind string) int {
	n := 0
	for _, c := range f.rows[kind] {
		n += c
	}
	return n
}

// notifications counts the run's notification keys the receiver got at least once (received), its calls
// for them, and lists the keys never received and the keys applied other than once (with the count).
func (f followUps) notifications() (received, calls int, missing, notOnce []string) {
	for _, k := range f.notifyKeys {
		n := f.received.Calls[k]
		calls += n
		if n == 0 {
			missing = append(missing, k)
			continue
		}
		received++
		if a := f.received.Applied[k]; a != 1 {
			notOnce = append(notOnce, fmt.Sprintf("%s applied %d times", k, a))
		}
	}
	sort.Strings(notOnce)
	return received, calls, missing, notOnce
}

// followUpsComplete reports whether every paid order's follow-ups have arrived: its two outbox rows sent,
// its loyalty credit, its notification received.
func (r *demoRun) followUpsComplete(f followUps) bool {
	paid := r.plan.Events[shop.EventOrderPaid]
	received, _, _, _ := f.notifications()
	return f.rows[outboxsql.KindMessage][outboxsql.StatusSent] >= paid && f.rows[outboxsql.KindEffect][outboxsql.StatusSent] >= paid &&
		f.loyalty.Credits >= paid && received >= paid
}

// followUpProblems checks the follow-ups against the plan: one LoyaltyPointsCredited message and one
// notification row per paid order, every one sent; one loyalty credit per paid order and the planned
// points per account (an event applied twice shows here); every notification received at least once and
// applied once per idempotency key.
func (r *demoRun) followUpProblems(f followUps) []string {
	var p []string
	paid := r.plan.Events[shop.EventOrderPaid]
	for _, k := range []struct{ kind, what string }{{outboxsql.KindMessage, shop.EventLoyaltyPointsCredited}, {outboxsql.KindEffect, "notification"}} {
		rows := f.rows[k.kind]
		if n := f.total(k.kind); n != paid {
			p = append(p, fmt.Sprintf("outbox: %d %s rows for %d OrderPaid", n, k.what, paid))
		}
		if n := f.total(k.kind) - rows[outboxsql.StatusSent]; n > 0 {
			p = append(p, fmt.Sprintf("outbox: %d %s rows not sent (%d pending, %d parked)",
				n, k.what, rows[outboxsql.StatusPending], rows[outboxsql.StatusParked]))
		}
	}
	if f.loyalty.Credits != paid {
		p = append(p, fmt.Sprintf("loyalty: %d credits for %d OrderPaid", f.loyalty.Credits, paid))
	}
	p = append(p, mapDiffs("loyalty points of", r.plan.Points, f.loyalty.Points)...)
	if f.receiverErr != "" {
		return append(p, "notifications: "+f.receiverErr)
	}
	_, _, missing, notOnce := f.notifications()
	if len(missing) > 0 {
		p = append(p, fmt.Sprintf("notifications: %d of %d never received (first %s)", len(missing), len(f.notifyKeys), missing[0]))
	}
	for i, s := range notOnce {
		if i == 5 {
			p = append(p, fmt.Sprintf("notifications: %d more keys not applied once", len(notOnce)-5))
			break
		}
		p = append(p, "notification "+s)
	}
	return p
}

// followUpLines are the verdict's lines on the follow-ups: the outbox, the loyalty group, the receiver.
func (r *demoRun) followUpLines(f followUps) []string {
	received, calls, _, notOnce := f.notifications()
	msg, eff := f.rows[outboxsql.KindMessage], f.rows[outboxsql.KindEffect]
	return []string{
		fmt.Sprintf("outbox: %d of %d LoyaltyPointsCredited messages and %d of %d notification effects sent, %d pending, %d parked",
			msg[outboxsql.StatusSent], f.total(outboxsql.KindMessage), eff[outboxsql.StatusSent], f.total(outboxsql.KindEffect),
			msg[outboxsql.StatusPending]+eff[outboxsql.StatusPending], msg[outboxsql.StatusParked]+eff[outboxsql.StatusParked]),
		fmt.Sprintf("loyalty (group %s): %d credits for %d OrderPaid, %d accounts with points (%d planned)",
			r.s.loyaltyGroup(), f.loyalty.Credits, r.plan.Events[shop.EventOrderPaid], len(f.loyalty.Points), len(r.plan.Points)),
		fmt.Sprintf("notifications: %d of %d idempotency keys received (%d calls), %d applied other than once",
			received, len(f.notifyKeys), calls, len(notOnce)),
	}
}
