package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
)

// The effects scenarios send the demo's domain workload (shop.DomainWorkload) with every order paid, so
// every order's OrderPaid transaction writes two outbox rows: a LoyaltyPointsCredited message, applied by
// the group <group>-loyalty of the same processes, and a notification effect posted to
// `example-consumer notify-receiver` through a Gate.

// messagesPerOrder is what one paid order of the effects workload sends: OrderCreated, OrderPaid and
// PaymentCaptured, and a tenth re-sent.
const messagesPerOrder = 3.3

// effectsWorkload is the domain workload of about messages messages, every order paid.
func effectsWorkload(run, topic string, messages int) (shop.DomainPlan, error) {
	orders := max(int(float64(messages)/messagesPerOrder), 10)
	return shop.DomainWorkload{RunID: run, Topic: topic, Orders: orders, PaidShare: 1, DuplicateShare: 0.1,
		FailOnce: orders / 100, Accounts: 20, Skus: 17, Poison: true}.Plan()
}

// receiverProc is a running `example-consumer notify-receiver`.
type receiverProc struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// startReceiver starts the notification receiver on a free port, its log in logDir/notify-receiver.log,
// and waits up to 10 s until it answers GET /counts.
func startReceiver(ctx context.Context, bin, logDir string) (*receiverProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(logDir, "notify-receiver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("notify receiver log: %w", err)
	}
	cmd := exec.Command(bin, "notify-receiver", "--notify-addr", addr)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("notify receiver: %w", err)
	}
	r := &receiverProc{addr: addr, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(r.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for status(ctx, "http://"+addr+"/counts") != http.StatusOK {
		if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("notify receiver did not answer on %s within 10 s (log in %s)", addr, logDir)
		}
		_ = sleep(ctx, 100*time.Millisecond)
	}
	return r, nil
}

// stop ends the receiver (SIGTERM, SIGKILL after 5 s) and waits for it.
func (r *receiverProc) stop() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// receiverCounts are the receiver's GET /counts: calls and applications per idempotency key.
type receiverCounts struct {
	Calls   map[string]int `json:"calls"`
	Applied map[string]int `json:"applied"`
}

func (r *receiverProc) counts(ctx context.Context) (receiverCounts, error) {
	var c receiverCounts
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+"/counts", nil)
	if err != nil {
		return c, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, fmt.Errorf("notify receiver counts: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("notify receiver counts: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return c, fmt.Errorf("notify receiver counts: %w", err)
	}
	return c, nil
}

// FollowUps is what an effects scenario's paid orders caused outside the shop's tables.
type FollowUps struct {
	// Rows counts the run's outbox rows per kind (outboxsql.KindMessage, KindEffect) and status.
	Rows map[string]map[string]int
	// Credits is the loyalty group's credits of the run; PointsWrong the accounts whose points differ
	// from the plan (a credit applied twice or missing).
	Credits, PointsWrong int
	// Keys is the number of notification rows (idempotency keys); Received how many of them the receiver
	// got at least once, with Calls calls in all; NotOnce how many were applied other than once.
	Keys, Received, Calls, NotOnce int
}

// total is the number of rows of kind, whatever their status.
func (f FollowUps) total(kind string) int {
	n := 0
	for _, c := range f.Rows[kind] {
		n += c
	}
	return n
}

// pendingRows counts the run's outbox rows not yet sent, per kind (rows of scope group).
func pendingRows(ctx context.Context, db *sqlx.DB, group string) (messages, effects int, err error) {
	var rows []struct {
		Kind string `db:"kind"`
		N    int    `db:"n"`
	}
	if err := db.SelectContext(ctx, &rows, `SELECT kind, COUNT(*) AS n FROM `+outboxsql.Table+`
		WHERE scope = ? AND status = ? GROUP BY kind`, group, outboxsql.StatusPending); err != nil {
		return 0, 0, fmt.Errorf("pending outbox rows: %w", err)
	}
	for _, r := range rows {
		switch r.Kind {
		case outboxsql.KindMessage:
			messages = r.N
		case outboxsql.KindEffect:
			effects = r.N
		}
	}
	return messages, effects, nil
}

// followUps reads the run's outbox rows, loyalty credits and the receiver's counts of its notification keys.
func (c *Checker) followUps(ctx context.Context) (FollowUps, error) {
	f := FollowUps{Rows: map[string]map[string]int{outboxsql.KindMessage: {}, outboxsql.KindEffect: {}}}
	prefix := c.Want.RunID + "-"
	var rows []struct {
		Kind   string `db:"kind"`
		Status string `db:"status"`
		N      int    `db:"n"`
	}
	if err := c.DB.SelectContext(ctx, &rows, `SELECT kind, status, COUNT(*) AS n FROM `+outboxsql.Table+`
		WHERE scope = ? AND source_event_id LIKE ? GROUP BY kind, status`, c.Want.Group, shop.PrefixPattern(prefix)); err != nil {
		return f, fmt.Errorf("outbox rows of the run: %w", err)
	}
	for _, r := range rows {
		if f.Rows[r.Kind] == nil {
			f.Rows[r.Kind] = map[string]int{}
		}
		f.Rows[r.Kind][r.Status] = r.N
	}
	// The example's one effect is the notification: every effect row of the run is one idempotency key.
	var keys []string
	if err := c.DB.SelectContext(ctx, &keys, `SELECT event_id FROM `+outboxsql.Table+`
		WHERE scope = ? AND source_event_id LIKE ? AND kind = ?`, c.Want.Group, shop.PrefixPattern(prefix), outboxsql.KindEffect); err != nil {
		return f, fmt.Errorf("notification rows of the run: %w", err)
	}
	loyalty, err := shop.RunLoyalty(ctx, c.DB, prefix)
	if err != nil {
		return f, err
	}
	f.Credits = loyalty.Credits
	f.PointsWrong = len(diffKeys(c.Want.Domain.Points, loyalty.Points))
	got, err := c.receiver.counts(ctx)
	if err != nil {
		return f, err
	}
	f.Keys = len(keys)
	for _, k := range keys {
		n := got.Calls[k]
		f.Calls += n
		if n > 0 {
			f.Received++
			if got.Applied[k] != 1 {
				f.NotOnce++
			}
		}
	}
	return f, nil
}

// followUpsComplete reports whether every paid order's follow-ups arrived.
func (c *Checker) followUpsComplete(f FollowUps) bool {
	paid := len(c.Want.Domain.Paid)
	return f.Rows[outboxsql.KindMessage][outboxsql.StatusSent] >= paid && f.Rows[outboxsql.KindEffect][outboxsql.StatusSent] >= paid &&
		f.Credits >= paid && f.Received >= paid
}

// followUpProblems: nothing lost (one message and one notification row per paid order, each sent),
// downstream effects once (one loyalty credit per OrderPaid, the planned points per account), every
// notification received at least once and applied once per idempotency key.
func (c *Checker) followUpProblems(f FollowUps) []string {
	var p []string
	paid := len(c.Want.Domain.Paid)
	for _, k := range []struct{ kind, what string }{{outboxsql.KindMessage, shop.EventLoyaltyPointsCredited}, {outboxsql.KindEffect, "notification"}} {
		rows := f.Rows[k.kind]
		if n := f.total(k.kind); n != paid {
			p = append(p, fmt.Sprintf("outbox: %d %s rows for %d OrderPaid", n, k.what, paid))
		}
		if n := f.total(k.kind) - rows[outboxsql.StatusSent]; n > 0 {
			p = append(p, fmt.Sprintf("outbox: %d %s rows not sent (%d pending, %d parked)", n, k.what,
				rows[outboxsql.StatusPending], rows[outboxsql.StatusParked]))
		}
	}
	if f.Credits != paid || f.PointsWrong > 0 {
		p = append(p, fmt.Sprintf("loyalty: %d credits for %d OrderPaid, %d accounts with other points than planned", f.Credits, paid, f.PointsWrong))
	}
	if f.Received != f.Keys || f.NotOnce > 0 {
		p = append(p, fmt.Sprintf("notifications: %d of %d keys received, %d applied other than once", f.Received, f.Keys, f.NotOnce))
	}
	return p
}

// domainProblems compares the shop's rows with the plan: each event type's effects, a reservation per
// order, stock and balances as planned.
func (c *Checker) domainProblems(e shop.DomainEffects) []string {
	var p []string
	plan := c.Want.Domain
	got := e.Effects()
	for _, typ := range shop.EventTypes() {
		if got[typ] != plan.Events[typ] {
			p = append(p, fmt.Sprintf("%s: %d effects for %d events", typ, got[typ], plan.Events[typ]))
		}
	}
	if e.Reservations != plan.Events[shop.EventOrderCreated] {
		p = append(p, fmt.Sprintf("%d reservations for %d orders", e.Reservations, plan.Events[shop.EventOrderCreated]))
	}
	if d := diffKeys(plan.OnHand, e.OnHand); len(d) > 0 {
		p = append(p, fmt.Sprintf("stock of %d SKUs differs from the plan (e.g. %s)", len(d), d[0]))
	}
	if d := diffKeys(plan.Balances, e.Balances); len(d) > 0 {
		p = append(p, fmt.Sprintf("balance of %d accounts differs from the plan (e.g. %s)", len(d), d[0]))
	}
	return p
}

// diffKeys lists, sorted, the keys whose value in got differs from want's.
func diffKeys(want, got map[string]int64) []string {
	var keys []string
	for k, v := range want {
		if got[k] != v {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
