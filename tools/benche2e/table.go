package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// result is one variant's drain in one round. na is set for a variant that cannot run yet (a hook for
// later work, such as the Redis fast path); it then has no figures.
type result struct {
	variant  string
	round    int // 1-based
	messages int
	elapsed  time.Duration // first handled message to the last
	na       string        // why the variant has no figures; "" when it ran
	counts   *counts       // what rmqguard's consumer decided (retries, lost batches); nil for other variants
	latency  *latencies    // commit-to-SEND_OK of the outbox variant's rows; nil for the others
	// consumed is the first handled message to the last when the variant had work after them (settle):
	// elapsed then runs to the end of that work.
	consumed time.Duration
	// cpu is the CPU time of this process, MariaDB and the broker from the variant's start to the end of
	// its drain ("bench 1.23, mariadb 2.34, broker 0.45"); "" when none could be read.
	cpu string
}

// rate returns the result's messages per second; 0 when it has no figures.
func (r result) rate() float64 {
	if r.na != "" || r.elapsed <= 0 {
		return 0
	}
	return float64(r.messages) / r.elapsed.Seconds()
}

// median returns the median of xs (the mean of the two middle values for an even count); 0 for none.
// xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}

// ratio formats a/base to two decimals, or "n/a" when either is missing (≤ 0).
func ratio(a, base float64) string {
	if a <= 0 || base <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a/base)
}

// summary is one variant's median over the rounds.
type summary struct {
	variant string
	rates   []float64 // per round that ran
	median  float64
	na      string
}

// summarize groups results by variant, in the order variants first appear, with each variant's median rate.
func summarize(results []result) []summary {
	var out []summary
	index := map[string]int{}
	for _, r := range results {
		i, ok := index[r.variant]
		if !ok {
			i = len(out)
			index[r.variant] = i
			out = append(out, summary{variant: r.variant})
		}
		if r.na != "" {
			out[i].na = r.na
			continue
		}
		out[i].rates = append(out[i].rates, r.rate())
	}
	for i := range out {
		out[i].median = median(out[i].rates)
	}
	return out
}

// baselineRates returns the baseline variant's rate per round and its median, or zeros when the baseline
// did not run.
func baselineRates(results []result, baseline string) (map[int]float64, float64) {
	perRound := map[int]float64{}
	var rates []float64
	for _, r := range results {
		if r.variant == baseline && r.na == "" {
			perRound[r.round] = r.rate()
			rates = append(rates, r.rate())
		}
	}
	return perRound, median(rates)
}

// writeTable prints the per-round rows (variant, round, messages, seconds, msgs/s, ratio to the baseline
// of the same round), then one row per variant with its median and the ratio of medians, then the ratio
// of the duplicate variants with and without Redis when both ran, the outbox's figures (writeOutbox), the
// ratios with targets and the consumer's decisions (writeTargets). Ratios are "n/a"
// when the baseline did not run; a variant that could not run shows n/a and why.
func writeTable(w io.Writer, results []result, baseline string) error {
	perRound, baseMedian := baselineRates(results, baseline)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "variant\tround\tmessages\tseconds\tmsgs/s\tx baseline (same round)")
	for _, r := range results {
		if r.na != "" {
			fmt.Fprintf(tw, "%s\t%d\t-\t-\tn/a\tn/a (%s)\n", r.variant, r.round, r.na)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.0f\t%s\n", r.variant, r.round, r.messages, r.elapsed.Seconds(),
			r.rate(), ratio(r.rate(), perRound[r.round]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "variant\trounds\tmedian msgs/s\tx baseline median\tmsgs/s per round")
	for _, s := range summarize(results) {
		if len(s.rates) == 0 {
			fmt.Fprintf(tw, "%s\t0\tn/a\tn/a\t(%s)\n", s.variant, s.na)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\n", s.variant, len(s.rates), s.median, ratio(s.median, baseMedian),
			joinRates(s.rates))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeRedisRatio(w, summarize(results))
	if err := writeOutbox(w, results); err != nil {
		return err
	}
	return writeTargets(w, results)
}

// outboxTarget is the floor of the outbox variant's median rate over rmqguard's.
const outboxTarget = 0.75

// writeOutbox prints, when the outbox variant ran, its commit-to-SEND_OK latencies per round and their
// medians, and the ratio of its median rate to rmqguard's.
func writeOutbox(w io.Writer, results []result) error {
	var p50s, p99s []float64
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range results {
		if r.latency == nil {
			continue
		}
		if len(p50s) == 0 {
			fmt.Fprintln(w, "\ncommit to SEND_OK of the outbox rows (created_at in the handler's transaction to sent_at, database clock):")
			fmt.Fprintln(tw, "variant\tround\trows\tp50 ms\tp99 ms")
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", r.variant, r.round, r.latency.rows, millis(r.latency.p50), millis(r.latency.p99))
		p50s = append(p50s, float64(r.latency.p50))
		p99s = append(p99s, float64(r.latency.p99))
	}
	if len(p50s) == 0 {
		return nil
	}
	fmt.Fprintf(tw, "%s\tmedian\t\t%s\t%s\n", variantOutbox, millis(time.Duration(median(p50s))), millis(time.Duration(median(p99s))))
	if err := tw.Flush(); err != nil {
		return err
	}
	medians := map[string]float64{}
	for _, s := range summarize(results) {
		medians[s.variant] = s.median
	}
	if with, without := medians[variantOutbox], medians[variantRmqguard]; with > 0 && without > 0 {
		fmt.Fprintf(w, "%s / %s (medians): %s (target ≥ %.2f)\n", variantOutbox, variantRmqguard, ratio(with, without), outboxTarget)
	}
	return nil
}

// millis formats d in milliseconds with one decimal.
func millis(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

// writeRedisRatio prints, when both duplicate variants ran, the ratio of the duplicates-redis median to the
// duplicates median: what the Redis fast path buys on a backlog of duplicates (the target: ≥ 3).
func writeRedisRatio(w io.Writer, sums []summary) {
	medians := map[string]float64{}
	for _, s := range sums {
		medians[s.variant] = s.median
	}
	withRedis, without := medians[variantDuplicatesRedis], medians[variantDuplicates]
	if withRedis > 0 && without > 0 {
		fmt.Fprintf(w, "\n%s / %s (medians): %s\n", variantDuplicatesRedis, variantDuplicates, ratio(withRedis, without))
	}
}

// joinRates formats rates as "a / b / c" with no decimals.
func joinRates(rates []float64) string {
	parts := make([]string, len(rates))
	for i, r := range rates {
		parts[i] = fmt.Sprintf("%.0f", r)
	}
	return strings.Join(parts, " / ")
}
