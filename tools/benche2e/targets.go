package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// target is a ratio with its floor: variant's rate over of's should be at least min. It is printed two ways:
// the ratio of the two medians, and the median of the per-round ratios (each pairing two drains of the
// same round, which a machine whose speed drifts between rounds distorts less).
type target struct {
	variant, of string
	min         float64
}

// targets are the ratios the table ends with, each when both variants ran.
var targets = []target{
	{variantRmqguard, variantBaseline, 0.95},
	{variantBatch, variantHandwrittenBatch, 1.0},
	{variantBatch, variantBatchCeiling, 0.8},
	{variantBatchHandler, variantBaseline, 5},
	{variantBatchHandler, variantHandwrittenMultirow, 0.8},
	{variantHotrowBatch, variantHotrow, 1.5},
	{variantHotrowBatchHandler, variantHotrow, 1.5},
}

// maxLostPerThousand is the most batches per 1,000 messages hotrow-batch may lose.
const maxLostPerThousand = 1.0

// writeTargets prints the ratios of targets whose variants both ran, then the consumer's decisions of the
// variants that ran on rmqguard's consumer (writeDecisions).
func writeTargets(w io.Writer, results []result) error {
	medians := map[string]float64{}
	for _, s := range summarize(results) {
		if len(s.rates) > 0 {
			medians[s.variant] = s.median
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := false
	for _, t := range targets {
		a, b := medians[t.variant], medians[t.of]
		if a <= 0 || b <= 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nratios of medians and their targets:")
			fmt.Fprintln(tw, "ratio\tvalue\tpaired (rounds)\ttarget\tmet\tmet paired")
			header = true
		}
		p, n := pairedRatio(results, t.variant, t.of)
		fmt.Fprintf(tw, "%s / %s\t%s\t%.2f (%d)\t≥ %.2f\t%s\t%s\n", t.variant, t.of, ratio(a, b), p, n, t.min,
			yesNo(a/b >= t.min), yesNo(p >= t.min))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeDecisions(w, results)
}

// pairedRatio returns the median over the rounds in which both variant and of ran of variant's rate over
// of's, and the number of such rounds (0 and 0 when none).
func pairedRatio(results []result, variant, of string) (float64, int) {
	rates := map[int]map[string]float64{}
	for _, r := range results {
		if r.na != "" || r.rate() <= 0 {
			continue
		}
		if rates[r.round] == nil {
			rates[r.round] = map[string]float64{}
		}
		rates[r.round][r.variant] = r.rate()
	}
	var ratios []float64
	for _, byVariant := range rates {
		if a, b := byVariant[variant], byVariant[of]; a > 0 && b > 0 {
			ratios = append(ratios, a/b)
		}
	}
	if len(ratios) == 0 {
		return 0, 0
	}
	return median(ratios), len(ratios)
}

// perThousand returns count per 1,000 of messages; 0 when there are no messages.
func perThousand(count int64, messages int) float64 {
	if messages <= 0 {
		return 0
	}
	return float64(count) * 1000 / float64(messages)
}

// decisionSummary is one variant's consumer decisions over its rounds.
type decisionSummary struct {
	variant                  string
	batch                    int
	lost, retries, letters   []float64 // per 1,000 messages, per round
	lostN, retriesN, letterN []int64   // counts, per round
}

// summarizeDecisions groups the results that carry the consumer's counts by variant, in the order variants
// first appear.
func summarizeDecisions(results []result) []*decisionSummary {
	var out []*decisionSummary
	index := map[string]*decisionSummary{}
	for _, r := range results {
		if r.counts == nil || r.na != "" {
			continue
		}
		s, ok := index[r.variant]
		if !ok {
			s = &decisionSummary{variant: r.variant, batch: r.counts.batch}
			index[r.variant] = s
			out = append(out, s)
		}
		s.lost = append(s.lost, perThousand(r.counts.lost, r.messages))
		s.retries = append(s.retries, perThousand(r.counts.retries, r.messages))
		s.letters = append(s.letters, perThousand(r.counts.deadLetter, r.messages))
		s.lostN = append(s.lostN, r.counts.lost)
		s.retriesN = append(s.retriesN, r.counts.retries)
		s.letterN = append(s.letterN, r.counts.deadLetter)
	}
	return out
}

// writeDecisions prints, per variant on rmqguard's consumer, the medians over the rounds of its lost
// batches (callbacks handled once more after their shared transaction was lost; "-" without batches),
// retry decisions and dead letters per 1,000 messages, with each round's counts; then hotrow-batch's lost
// batches against maxLostPerThousand when it ran.
func writeDecisions(w io.Writer, results []result) error {
	sums := summarizeDecisions(results)
	if len(sums) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nrmqguard's consumer per 1,000 messages (median of the rounds; counts per round: lost/retries/dead letters):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "variant\tlost batches\tretries\tdead letters\tper round")
	for _, s := range sums {
		lost := "-"
		if s.batch > 1 {
			lost = fmt.Sprintf("%.2f", median(s.lost))
		}
		rounds := make([]string, len(s.lostN))
		for i := range s.lostN {
			rounds[i] = fmt.Sprintf("%d/%d/%d", s.lostN[i], s.retriesN[i], s.letterN[i])
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%s\n", s.variant, lost, median(s.retries), median(s.letters), strings.Join(rounds, " · "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range sums {
		if s.variant == variantHotrowBatch {
			m := median(s.lost)
			fmt.Fprintf(w, "%s lost batches per 1,000 messages (median): %.2f (target ≤ %.0f): %s\n", s.variant, m,
				maxLostPerThousand, yesNo(m <= maxLostPerThousand))
		}
	}
	return nil
}

// yesNo is "yes" for true, "NO" for false.
func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}
