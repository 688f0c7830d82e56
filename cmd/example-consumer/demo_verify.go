package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/scrape"
	"github.com/rmqguard/rmqguard/topics"
)

// drained is what the demo found once the consumer had drained the run.
type drained struct {
	effects shop.DomainEffects
	counts  counts
	// decisions counts this run's processed_event rows per result_status (SUCCESS, STALE).
	decisions map[string]int
	letters   []*primitive.MessageExt
	// followUps are the paid orders' outbox rows, loyalty credits and notifications.
	followUps followUps
}

// complete reports whether every planned effect is there and every message without effect was counted.
func (r *demoRun) complete(d drained, comp compensation) bool {
	for typ, n := range r.plan.Events {
		if d.effects.Effects()[typ] < n {
			return false
		}
	}
	success, stale := r.decisionsExpected(comp)
	return r.followUpsComplete(d.followUps) && d.counts.duplicates >= float64(r.plan.Duplicates) && d.counts.stale >= float64(r.staleExpected(comp)) &&
		d.decisions[dedupsql.ResultSuccess] >= success && d.decisions[dedupsql.ResultStale] >= stale
}

// decisionsExpected is how many processed_event rows of this run a correct consumer leaves: SUCCESS for
// every event with an effect except the OrderCancelled messages the job beat, which are STALE like the
// late OrderPaids. Unlike the consumer's counters (the whole group: other runs' redeliveries count too),
// these rows are this run's alone, so they are compared exactly: an order cancelled by both its message
// and the job would show one SUCCESS too many and one STALE too few.
func (r *demoRun) decisionsExpected(comp compensation) (success, stale int) {
	return r.plan.TotalEvents() - comp.cancelled, r.plan.Late + comp.cancelled
}

// observe reads the run's effects and counters (and, when withLetters, its dead letters).
func (r *demoRun) observe(ctx context.Context, withLetters bool) (drained, error) {
	var d drained
	var err error
	if d.effects, err = shop.RunEffects(ctx, r.db, r.o.runID+"-"); err != nil {
		return d, err
	}
	c, err := r.counts(ctx)
	if err != nil {
		return d, err
	}
	d.counts = r.since(c)
	if d.decisions, err = shop.RunDecisions(ctx, r.db, r.s.group, r.o.runID+"-"); err != nil {
		return d, err
	}
	if d.followUps, err = observeFollowUps(ctx, r.db, r.s.group, r.o.runID+"-", r.s.notifyAddr); err != nil {
		return d, err
	}
	if withLetters {
		d.letters, err = runLetters(ctx, r.nameServers, r.s.group, r.o.runID)
	}
	return d, err
}

// waitForDrain polls every 2 s until the run is complete and its dead letter arrived, or --timeout passed;
// then it lets stray redeliveries arrive for 3 s and reads everything once more.
func (r *demoRun) waitForDrain(ctx context.Context, comp compensation) (drained, error) {
	deadline := time.Now().Add(r.o.timeout)
	for {
		d, err := r.observe(ctx, false)
		if err != nil {
			return d, err
		}
		if r.complete(d, comp) {
			if d, err = r.observe(ctx, true); err != nil || len(d.letters) > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			break
		}
		e := d.effects.Effects()
		received, _, _, _ := d.followUps.notifications()
		fmt.Printf("waiting: orders %d/%d, paid %d/%d, payments %d/%d, cancelled %d/%d, duplicates %.0f/%d, stale %.0f/%d, loyalty %d, notified %d\n",
			e[shop.EventOrderCreated], r.plan.Events[shop.EventOrderCreated], e[shop.EventOrderPaid], r.plan.Events[shop.EventOrderPaid],
			e[shop.EventPaymentCaptured], r.plan.Events[shop.EventPaymentCaptured], e[shop.EventOrderCancelled], r.plan.Events[shop.EventOrderCancelled],
			d.counts.duplicates, r.plan.Duplicates, d.counts.stale, r.staleExpected(comp), d.followUps.loyalty.Credits, received)
		select {
		case <-ctx.Done():
			return d, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	time.Sleep(3 * time.Second)
	return r.observe(ctx, true)
}

// staleExpected is how many messages must be acknowledged as stale: the late OrderPaids and the
// OrderCancelled messages of the orders the compensation job cancelled first. A re-send of one of them is a
// duplicate, not a second stale: of two deliveries of one stale event exactly one records it (the other
// finds its STALE row), and a re-send of any other event finds its dedup row.
func (r *demoRun) staleExpected(comp compensation) int {
	return r.plan.Late + comp.cancelled
}

// problems compares what the run left with the plan: each event's effect once, stock and balances as
// planned, one release per cancelled order, the counters, the run's dedup decisions, the poison letter alone,
// the paid orders' follow-ups (followUpProblems).
func (r *demoRun) problems(d drained, comp compensation) []string {
	var p []string
	effects := d.effects.Effects()
	for _, typ := range shop.EventTypes() {
		if effects[typ] != r.plan.Events[typ] {
			p = append(p, fmt.Sprintf("%s: %d effects for %d events", typ, effects[typ], r.plan.Events[typ]))
		}
	}
	if d.effects.Reservations != r.plan.Events[shop.EventOrderCreated] || d.effects.Releases != len(r.plan.Cancelled) {
		p = append(p, fmt.Sprintf("%d reservations and %d releases for %d orders, %d cancelled",
			d.effects.Reservations, d.effects.Releases, r.plan.Events[shop.EventOrderCreated], len(r.plan.Cancelled)))
	}
	p = append(p, mapDiffs("stock of", r.plan.OnHand, d.effects.OnHand)...)
	p = append(p, mapDiffs("balance of", r.plan.Balances, d.effects.Balances)...)
	if d.counts.duplicates < float64(r.plan.Duplicates) {
		p = append(p, fmt.Sprintf("duplicates counted %.0f < %d re-sent", d.counts.duplicates, r.plan.Duplicates))
	}
	if want := r.staleExpected(comp); d.counts.stale < float64(want) {
		p = append(p, fmt.Sprintf("stale counted %.0f < %d (%d late OrderPaid, %d OrderCancelled after the job cancelled first)",
			d.counts.stale, want, r.plan.Late, comp.cancelled))
	}
	if success, stale := r.decisionsExpected(comp); d.decisions[dedupsql.ResultSuccess] != success || d.decisions[dedupsql.ResultStale] != stale {
		p = append(p, fmt.Sprintf("processed_event rows of this run: %d SUCCESS and %d STALE, want %d and %d",
			d.decisions[dedupsql.ResultSuccess], d.decisions[dedupsql.ResultStale], success, stale))
	}
	if len(d.letters) != 1 || d.letters[0].GetProperty(shop.PropEventID) != r.plan.PoisonEventID {
		ids := make([]string, 0, len(d.letters))
		for _, l := range d.letters {
			ids = append(ids, l.GetProperty(shop.PropEventID)+" ("+l.GetProperty(letter.PropReason)+")")
		}
		p = append(p, fmt.Sprintf("DLQ of this run holds %v, want only %s", ids, r.plan.PoisonEventID))
	}
	return append(p, r.followUpProblems(d.followUps)...)
}

// mapDiffs lists the keys whose value differs between want and got (at most 5, then a count).
func mapDiffs(what string, want, got map[string]int64) []string {
	var keys []string
	for k := range want {
		if got[k] != want[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for i, k := range keys {
		if i == 5 {
			out = append(out, fmt.Sprintf("%s %d more differ", what, len(keys)-5))
			break
		}
		out = append(out, fmt.Sprintf("%s %s: %d, want %d", what, k, got[k], want[k]))
	}
	return out
}

// verdict prints the report — dead letter, counts, Prometheus's ratio, the reconciliation — and the last
// line, "exactly-once: ok …" or "exactly-once: FAILED …" (then an error, exit 1).
func (r *demoRun) verdict(ctx context.Context, d drained, comp compensation) error {
	problems := r.problems(d, comp)
	if len(d.letters) == 1 {
		fmt.Printf("dead letter: event %s, reason %q\n", d.letters[0].GetProperty(shop.PropEventID), d.letters[0].GetProperty(letter.PropReason))
	}
	effects := 0
	for _, n := range d.effects.Effects() {
		effects += n
	}
	fmt.Printf("MariaDB: %d orders (%d PAID, %d CANCELLED: %d by the job), %d reservations, %d releases, %d payments, %d SKUs, %d accounts as planned; "+
		"/metrics: %.0f duplicates, %.0f stale; %%DLQ%%%s: %d letter(s) of this run (%.1fs)\n",
		d.effects.Orders, d.effects.ByStatus[shop.StatusPaid], d.effects.ByStatus[shop.StatusCancelled], comp.cancelled,
		d.effects.Reservations, d.effects.Releases, d.effects.Payments, len(r.plan.OnHand), len(r.plan.Balances),
		d.counts.duplicates, d.counts.stale, r.s.group, len(d.letters), time.Since(r.start).Seconds())
	fmt.Println(redisLine(d.counts))
	for _, l := range r.followUpLines(d.followUps) {
		fmt.Println(l)
	}
	ratio := checkPrometheusRatio(ctx, r.o.promURL, r.o.metricURL, r.s.group, r.o.promWait)
	if ratio.problem != "" {
		problems = append(problems, ratio.problem)
	}
	if ratio.line != "" {
		fmt.Println(ratio.line)
	}
	rec, err := shop.Reconcile(ctx, r.db, shop.ReconcileScope{Group: r.s.group, Prefix: r.o.runID + "-"})
	if err != nil {
		return err
	}
	printReconcile(os.Stdout, rec)
	if !rec.OK() {
		problems = append(problems, rec.Verdict())
	}
	summary := fmt.Sprintf("events=%d effects=%d duplicates=%.0f stale=%.0f dead-lettered=%d",
		r.plan.TotalEvents(), effects, d.counts.duplicates, d.counts.stale, len(d.letters))
	if len(problems) > 0 {
		fmt.Println("problems: " + strings.Join(problems, "; "))
		fmt.Println("exactly-once: FAILED " + summary)
		return errors.New("exactly-once check failed")
	}
	fmt.Println("exactly-once: ok " + summary)
	return nil
}

// redisLine tells how many of the run's duplicates the Redis fast path answered and how many MySQL did
// (the rest), with the fast path's fall-throughs to MySQL (misses of new events included).
func redisLine(c counts) string {
	if c.redisAnswered == 0 && c.fallbacks == 0 {
		return fmt.Sprintf("duplicates: %.0f, all answered by MySQL (no Redis fast path, or it never answered)", c.duplicates)
	}
	return fmt.Sprintf("duplicates: %.0f answered by Redis, %.0f by MySQL; %.0f Redis fall-throughs to MySQL (rmqguard_redis_fallbacks_total)",
		c.redisAnswered, max(c.duplicates-c.redisAnswered, 0), c.fallbacks)
}

// runLetters returns the dead letters of this run (KEYS or EVENT_ID starting with the run ID).
func runLetters(ctx context.Context, nameServers []string, group, runID string) ([]*primitive.MessageExt, error) {
	all, err := dlqtool.Read(ctx, topics.Cluster{NameServers: nameServers}, group, 0)
	if err != nil {
		return nil, err
	}
	var mine []*primitive.MessageExt
	for _, m := range all {
		if strings.HasPrefix(m.GetProperty(shop.PropEventID), runID+"-") || strings.HasPrefix(m.GetKeys(), runID+"-") {
			mine = append(mine, m)
		}
	}
	return mine, nil
}

// scrapeCounter reads one counter with labels group and topic from the consumer's /metrics; 0 when absent.
func scrapeCounter(ctx context.Context, url, name, group, topic string) (float64, error) {
	v, err := scrape.Counter(ctx, url, name, map[string]string{"group": group, "topic": topic})
	if err != nil {
		return 0, fmt.Errorf("%w (is `example-consumer run` running?)", err)
	}
	return v, nil
}
