package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
)

// rate is a result of 1,000 messages at msgsPerSec in round 1.
func rate(variant string, msgsPerSec float64) result {
	return result{variant: variant, round: 1, messages: 1000, elapsed: time.Duration(1000 / msgsPerSec * float64(time.Second))}
}

// fieldsOf returns the whitespace-separated fields after prefix of the first line of out's section that
// starts with prefix; nil when none. The section begins after the first line containing section.
func fieldsOf(out, section, prefix string) []string {
	_, out, _ = strings.Cut(out, section)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix) {
			return strings.Fields(strings.TrimPrefix(line, prefix))
		}
	}
	return nil
}

// The headers of writeTargets's sections.
const (
	ratios            = "ratios of medians and their targets:"
	perThousandHeader = "rmqguard's consumer per 1,000 messages"
)

func TestBenchE2E_TargetsPrintTheRatiosOfMediansWithTheirFloors(t *testing.T) {
	rs := []result{
		rate(variantBaseline, 1000), rate(variantRmqguard, 960),
		rate(variantBatch, 2000), rate(variantHandwrittenBatch, 2500), rate(variantBatchCeiling, 2400),
		rate(variantHandwrittenMultirow, 6000), rate(variantBatchHandler, 5000),
		rate(variantHotrow, 800), rate(variantHotrowBatch, 1600),
	}
	var b strings.Builder
	require.NoError(t, writeTable(&b, rs, variantBaseline))
	out := b.String()
	require.Contains(t, out, "\nratios of medians and their targets:\n")
	// value, paired median (rounds), "≥", floor, met, met paired; one round: both ways agree
	require.Equal(t, []string{"0.96", "0.96", "(1)", "≥", "0.95", "yes", "yes"}, fieldsOf(out, ratios, "rmqguard / baseline "))
	require.Equal(t, []string{"0.80", "0.80", "(1)", "≥", "1.00", "NO", "NO"}, fieldsOf(out, ratios, "rmqguard-batch / handwritten-batch "))
	require.Equal(t, []string{"0.83", "0.83", "(1)", "≥", "0.80", "yes", "yes"}, fieldsOf(out, ratios, "rmqguard-batch / batch-ceiling "))
	require.Equal(t, []string{"5.00", "5.00", "(1)", "≥", "5.00", "yes", "yes"}, fieldsOf(out, ratios, "rmqguard-batch-handler / baseline "))
	require.Equal(t, []string{"0.83", "0.83", "(1)", "≥", "0.80", "yes", "yes"}, fieldsOf(out, ratios, "rmqguard-batch-handler / handwritten-multirow "))
	require.Equal(t, []string{"2.00", "2.00", "(1)", "≥", "1.50", "yes", "yes"}, fieldsOf(out, ratios, "hotrow-batch / hotrow "))
	require.NotContains(t, out, "rmqguard's consumer per 1,000", "no decision section without the consumer's counts")

	b.Reset()
	require.NoError(t, writeTable(&b, []result{rate(variantBaseline, 1000), rate(variantBatchHandler, 5000),
		{variant: variantHandwrittenMultirow, round: 1, na: "not here"}}, variantBaseline))
	out = b.String()
	require.NotNil(t, fieldsOf(out, ratios, "rmqguard-batch-handler / baseline "))
	require.Nil(t, fieldsOf(out, ratios, "rmqguard-batch-handler / handwritten-multirow "), "a variant without figures has no ratio")
	require.Nil(t, fieldsOf(out, ratios, "rmqguard / baseline "), "a variant that did not run has no ratio")

	b.Reset()
	require.NoError(t, writeTable(&b, []result{rate(variantBaseline, 1000), rate("raw", 9000)}, variantBaseline))
	require.NotContains(t, b.String(), "ratios of medians and their targets", "no section when no target's variants ran")
}

// inRound is rate(variant, msgsPerSec) in round n.
func inRound(n int, variant string, msgsPerSec float64) result {
	r := rate(variant, msgsPerSec)
	r.round = n
	return r
}

func TestBenchE2E_PairedRatioIsTheMedianOfPerRoundRatiosWhenTheMachineDrifts(t *testing.T) {
	// The machine slows down round by round: each round rmqguard runs at 0.9 of that round's baseline, but
	// the medians of the two variants come from different speeds.
	rs := []result{
		inRound(1, variantBaseline, 1000), inRound(1, variantRmqguard, 900),
		inRound(2, variantBaseline, 3000), inRound(2, variantRmqguard, 2700),
		inRound(3, variantBaseline, 2000), inRound(3, variantRmqguard, 1800),
		inRound(4, variantBaseline, 500), // its partner is missing: the round is not paired
		{variant: variantRmqguard, round: 4, na: "not here"},
	}
	var b strings.Builder
	require.NoError(t, writeTable(&b, rs, variantBaseline))
	// medians: rmqguard 1800 (of 900, 1800, 2700), baseline 1500 (of 500, 1000, 2000, 3000)
	require.Equal(t, []string{"1.20", "0.90", "(3)", "≥", "0.95", "yes", "NO"}, fieldsOf(b.String(), ratios, "rmqguard / baseline "))
}

func TestBenchE2E_DecisionsArePrintedPerThousandMessagesWithEachRoundsCounts(t *testing.T) {
	hot := func(round, messages int, lost, retries int64) result {
		return result{variant: variantHotrowBatch, round: round, messages: messages, elapsed: time.Second,
			counts: &counts{batch: batchSize, lost: lost, retries: retries}}
	}
	rs := []result{
		{variant: variantHotrow, round: 1, messages: 2000, elapsed: time.Second, counts: &counts{batch: 1, retries: 1}},
		hot(1, 2000, 1, 40), hot(2, 2000, 4, 100), hot(3, 2000, 2, 60),
		rate(variantBaseline, 1000), // hand-written: no counts
	}
	var b strings.Builder
	require.NoError(t, writeTable(&b, rs, variantBaseline))
	out := b.String()
	require.Contains(t, out, "\nrmqguard's consumer per 1,000 messages")
	// lost batches (none without batches), retries, dead letters per 1,000 (medians), counts per round
	require.Equal(t, []string{"-", "0.50", "0.00", "0/1/0"}, fieldsOf(out, perThousandHeader, "hotrow "))
	require.Equal(t, []string{"1.00", "30.00", "0.00", "1/40/0", "·", "4/100/0", "·", "2/60/0"}, fieldsOf(out, perThousandHeader, "hotrow-batch  "))
	require.Nil(t, fieldsOf(out, perThousandHeader, "baseline "), "a hand-written variant has no decision row")
	require.Contains(t, out, "\nhotrow-batch lost batches per 1,000 messages (median): 1.00 (target ≤ 1): yes\n")

	b.Reset()
	require.NoError(t, writeTable(&b, []result{hot(1, 1000, 3, 0)}, variantBaseline))
	require.Contains(t, b.String(), "hotrow-batch lost batches per 1,000 messages (median): 3.00 (target ≤ 1): NO\n")
}

func TestBenchE2E_ConsumerCountsRetriesDeadLettersAndHandledMessagesFromDecisions(t *testing.T) {
	c := &consumerCounts{batch: batchSize}
	handled := 0
	for _, dec := range []consumer.Decision{
		{Outcome: consumer.Processed()},
		{Outcome: consumer.Duplicate()},
		{Outcome: consumer.Processed(), BatchRetried: true}, // acknowledged by itself, back with its batch
		{Outcome: consumer.Retry(0, "deadlock")},
		{Outcome: consumer.Outcome{Kind: consumer.KindUnavailable}},
		{Outcome: consumer.Outcome{Kind: consumer.KindDeadLettered}},
	} {
		if c.decided(dec) {
			handled++
		}
	}
	require.Equal(t, 3, handled, "processed, duplicate and the dead letter the consumer published are handled for good")
	require.Equal(t, &counts{batch: batchSize, retries: 3, deadLetter: 1}, c.snapshot())
	require.Nil(t, (*consumerCounts)(nil).snapshot(), "a variant without rmqguard's consumer has no counts")
}

func TestBenchE2E_LostBatchesAreCountedFromTheConsumersLine(t *testing.T) {
	c := &consumerCounts{batch: batchSize}
	log := c.logger()
	log.Info(lostBatchLine)
	log.Info("message retried")
	log.Debug(lostBatchLine)
	log.With().Info(lostBatchLine)
	require.EqualValues(t, 2, c.lost.Load())
}

func TestBenchE2E_ApplicationPoolInterpolatesParamsUnlessTurnedOff(t *testing.T) {
	const dsn = "u:p@tcp(127.0.0.1:3306)/db?parseTime=true"
	got, err := appDSN(dsn, true)
	require.NoError(t, err)
	cfg, err := mysql.ParseDSN(got)
	require.NoError(t, err)
	require.True(t, cfg.InterpolateParams)
	require.True(t, cfg.ParseTime, "the DSN's other settings stay")
	require.Equal(t, "db", cfg.DBName)

	got, err = appDSN(dsn, false)
	require.NoError(t, err)
	require.Equal(t, dsn, got, "-interpolate-params=false: the DSN as given")

	_, err = appDSN("not a dsn", true)
	require.ErrorContains(t, err, "-dsn")

	o, err := parseFlags(nil)
	require.NoError(t, err)
	require.True(t, o.interpolate, "on by default")
	o, err = parseFlags([]string{"-interpolate-params=false"})
	require.NoError(t, err)
	require.False(t, o.interpolate)
}

func TestBenchE2E_HotMessagesCreditTheirAccountsAggregate(t *testing.T) {
	m := hotMessage("T", "run-h-57", 57)
	require.Equal(t, "acct-07", m.GetProperty("AGGREGATE_ID"), "the aggregate is the account: batches lock it in one order")
	require.Equal(t, "run-h-57", m.GetProperty("EVENT_ID"))
	var ev hotEvent
	require.NoError(t, json.Unmarshal(m.Body, &ev))
	require.Equal(t, hotEvent{Account: "acct-07", Amount: 2}, ev) // 57 % 7 + 1

	require.Len(t, hotBalances(1000), hotAccounts)
	want := hotBalances(51)
	require.Equal(t, int64(1+2), want["acct-00"], "messages 0 and 50: amounts 0%7+1 and 50%7+1")
	require.Equal(t, int64(2), want["acct-01"])
	require.Equal(t, int64(1), want["acct-49"], "message 49 alone: 49%7+1")
}
