package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBenchE2E_Median(t *testing.T) {
	require.Equal(t, 0.0, median(nil))
	require.Equal(t, 5.0, median([]float64{5}))
	require.Equal(t, 2.0, median([]float64{3, 1, 2}))
	require.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
	xs := []float64{3, 1, 2}
	median(xs)
	require.Equal(t, []float64{3, 1, 2}, xs, "median must not reorder its input")
}

func TestBenchE2E_Ratio(t *testing.T) {
	require.Equal(t, "0.50", ratio(1000, 2000))
	require.Equal(t, "n/a", ratio(1000, 0), "no baseline")
	require.Equal(t, "n/a", ratio(0, 2000), "variant without figures")
}

func TestBenchE2E_RateAndSummary(t *testing.T) {
	rs := []result{
		{variant: "baseline", round: 1, messages: 1000, elapsed: time.Second},
		{variant: "rmqguard", round: 1, messages: 1000, elapsed: 2 * time.Second},
		{variant: "duplicates-redis", round: 1, na: "not yet"},
		{variant: "baseline", round: 2, messages: 1000, elapsed: 500 * time.Millisecond},
		{variant: "rmqguard", round: 2, messages: 1000, elapsed: time.Second},
		{variant: "duplicates-redis", round: 2, na: "not yet"},
	}
	require.Equal(t, 500.0, rs[1].rate())
	require.Equal(t, 0.0, rs[2].rate())
	sum := summarize(rs)
	require.Len(t, sum, 3)
	require.Equal(t, "baseline", sum[0].variant)
	require.Equal(t, 1500.0, sum[0].median)
	require.Equal(t, []float64{500, 1000}, sum[1].rates)
	require.Equal(t, 750.0, sum[1].median)
	require.Equal(t, "not yet", sum[2].na)
	require.Empty(t, sum[2].rates)
}

func TestBenchE2E_TableRows(t *testing.T) {
	rs := []result{
		{variant: "baseline", round: 1, messages: 1000, elapsed: time.Second},
		{variant: "rmqguard", round: 1, messages: 1000, elapsed: 2 * time.Second},
		{variant: "duplicates-redis", round: 1, na: "not yet"},
	}
	var b strings.Builder
	require.NoError(t, writeTable(&b, rs, "baseline"))
	fields := map[string][]string{}
	section := 0
	for _, line := range strings.Split(b.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			section++
			continue
		}
		fields[strings.Repeat("#", section)+f[0]] = f
	}
	// Per round: variant, round, messages, seconds, msgs/s, ratio to the same round's baseline.
	require.Equal(t, []string{"rmqguard", "1", "1000", "2.00", "500", "0.50"}, fields["rmqguard"])
	require.Equal(t, []string{"baseline", "1", "1000", "1.00", "1000", "1.00"}, fields["baseline"])
	require.Equal(t, []string{"duplicates-redis", "1", "-", "-", "n/a", "n/a", "(not", "yet)"}, fields["duplicates-redis"])
	// Medians: variant, rounds, median, ratio of medians, per-round rates.
	require.Equal(t, []string{"rmqguard", "1", "500", "0.50", "500"}, fields["#rmqguard"])
	require.Equal(t, []string{"duplicates-redis", "0", "n/a", "n/a", "(not", "yet)"}, fields["#duplicates-redis"])
}

func TestBenchE2E_TableShowsTheRedisRatio(t *testing.T) {
	rs := []result{
		{variant: "baseline", round: 1, messages: 1000, elapsed: time.Second},
		{variant: "duplicates", round: 1, messages: 1000, elapsed: 400 * time.Millisecond},
		{variant: "duplicates-redis", round: 1, messages: 1000, elapsed: 100 * time.Millisecond},
	}
	var b strings.Builder
	require.NoError(t, writeTable(&b, rs, "baseline"))
	require.Contains(t, b.String(), "\nduplicates-redis / duplicates (medians): 4.00\n")

	b.Reset()
	require.NoError(t, writeTable(&b, rs[:2], "baseline"))
	require.NotContains(t, b.String(), "duplicates-redis / duplicates", "no ratio without the Redis variant")
}

func TestBenchE2E_TableShowsOutboxLatencyAndRatio(t *testing.T) {
	rs := []result{
		{variant: "rmqguard", round: 1, messages: 1000, elapsed: time.Second},
		{variant: "rmqguard-outbox", round: 1, messages: 1000, elapsed: 1250 * time.Millisecond,
			latency: &latencies{rows: 1000, p50: 4 * time.Millisecond, p99: 30 * time.Millisecond}},
		{variant: "rmqguard", round: 2, messages: 1000, elapsed: time.Second},
		{variant: "rmqguard-outbox", round: 2, messages: 1000, elapsed: 2 * time.Second,
			latency: &latencies{rows: 1000, p50: 6 * time.Millisecond, p99: 50 * time.Millisecond}},
	}
	var b strings.Builder
	require.NoError(t, writeTable(&b, rs, "baseline"))
	out := b.String()
	require.Contains(t, out, "commit to SEND_OK of the outbox rows")
	var rows [][]string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "rmqguard-outbox" && f[1] != "/" && strings.Contains(f[len(f)-1], ".") {
			rows = append(rows, f)
		}
	}
	require.Equal(t, [][]string{{"rmqguard-outbox", "1", "1000", "4.0", "30.0"}, {"rmqguard-outbox", "2", "1000", "6.0", "50.0"},
		{"rmqguard-outbox", "median", "5.0", "40.0"}}, rows)
	// medians 1000 and (800+500)/2 = 650 msgs/s
	require.Contains(t, out, "\nrmqguard-outbox / rmqguard (medians): 0.65 (target ≥ 0.75)\n")

	b.Reset()
	require.NoError(t, writeTable(&b, rs[:1], "baseline"))
	require.NotContains(t, b.String(), "SEND_OK", "no outbox section without the outbox variant")
}

func TestBenchE2E_PercentileIsNearestRank(t *testing.T) {
	require.Zero(t, percentile(nil, 0.5))
	xs := make([]int64, 100)
	for i := range xs {
		xs[i] = int64(i + 1) // 1..100 µs
	}
	require.Equal(t, 50*time.Microsecond, percentile(xs, 0.50))
	require.Equal(t, 99*time.Microsecond, percentile(xs, 0.99))
	require.Equal(t, 7*time.Microsecond, percentile([]int64{7}, 0.99))
}

func TestBenchE2E_TableWithoutBaselineSaysNA(t *testing.T) {
	var b strings.Builder
	require.NoError(t, writeTable(&b, []result{{variant: "raw", round: 1, messages: 10, elapsed: time.Second}}, "baseline"))
	lines := strings.Split(b.String(), "\n")
	require.Equal(t, []string{"raw", "1", "10", "1.00", "10", "n/a"}, strings.Fields(lines[1]))
	require.Equal(t, []string{"raw", "1", "10", "n/a", "10"}, strings.Fields(lines[4]))
}

func TestBenchE2E_TrackerCountsDistinctMessages(t *testing.T) {
	tr := newTracker(3)
	tr.handled("run-e-0")
	tr.handled("run-e-0") // a redelivery
	tr.handled("other")   // not the backlog's
	tr.handled("run-e-7") // out of range
	require.EqualValues(t, 1, tr.count.Load())
	select {
	case <-tr.done:
		t.Fatal("done after 1 of 3 messages")
	default:
	}
	tr.handled("run-e-2")
	tr.handled("run-e-1")
	<-tr.done
	require.EqualValues(t, 3, tr.count.Load())
	require.GreaterOrEqual(t, tr.last.Load(), tr.first.Load())
}

func TestBenchE2E_ParseVariants(t *testing.T) {
	vs, err := parseVariants("baseline, rmqguard")
	require.NoError(t, err)
	require.Equal(t, []string{"baseline", "rmqguard"}, vs)
	vs, err = parseVariants(defaultVariants)
	require.NoError(t, err)
	require.Equal(t, []string{"raw", "baseline", "rmqguard", "rmqguard-outbox", "rmqguard-batch", "handwritten-batch", "batch-ceiling",
		"handwritten-claim-batch", "handwritten-multirow", "rmqguard-batch-handler", "hotrow", "hotrow-batch", "handwritten-hotrow-batch", "hotrow-batch-handler", "duplicates", "duplicates-redis"}, vs,
		"the hand-written batch references right after rmqguard-batch, the multi-row one before the batch handler")
	_, err = parseVariants("baseline,nope")
	require.ErrorContains(t, err, `unknown variant "nope"`)
	_, err = parseVariants("raw,raw")
	require.ErrorContains(t, err, "given twice")
	_, err = parseFlags([]string{"-messages", "0", "-rounds", "0"})
	require.ErrorContains(t, err, "-messages 0")
	require.ErrorContains(t, err, "-rounds 0")
}

func TestBenchE2E_CPUOfAStatLine(t *testing.T) {
	// pid (comm with blanks) state ppid ... utime=fields 14, stime=15 (ticks of 10 ms)
	line := "1724 (mariadbd x) S 1 1724 1724 0 -1 4194560 5000 0 0 0 1234 566 0 0 20 0 30 0 100 0 0"
	d, err := parseStatCPU(line)
	require.NoError(t, err)
	require.Equal(t, 18*time.Second, d)
	_, err = parseStatCPU("1 (x) S 1 2")
	require.Error(t, err)
	before := cpuSample{"bench": time.Second, "mariadb": 2 * time.Second}
	after := cpuSample{"bench": 3 * time.Second, "mariadb": 2500 * time.Millisecond, "broker": time.Second}
	require.Equal(t, "bench 2.00, mariadb 0.50", after.since(before, cpuProcesses()), "a process missing before is left out")
}
