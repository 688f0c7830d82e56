package dlq

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/topics"
)

// F42: a census that does not read a broker where the last census counted waiting letters, and that is not
// listed as a master (one that is down: the name server forgets it and the scan of the others is complete),
// is withheld, for at most missingBrokerLimit; a broker read again, read with no waiting letter, or listed
// without a share of the DLQ, is no longer missing.
func TestMonitorMissing_ABrokerThatHeldWaitingLettersAndIsNotReadWithholdsTheCount(t *testing.T) {
	m := &Monitor{held: map[string]time.Time{}}
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	census := func(waiting map[string]int) dlqtool.Census { return dlqtool.Census{WaitingByBroker: waiting} }
	none := map[string]bool{} // no master listed besides those read

	assert.Empty(t, m.missing(census(map[string]int{"a": 1, "b": 2, "c": 0}), none, t0))
	assert.Equal(t, []string{"b"}, m.missing(census(map[string]int{"a": 1, "c": 0}), none, t0.Add(time.Minute)), "b down")
	assert.Equal(t, []string{"a", "b"}, m.missing(census(map[string]int{}), none, t0.Add(2*time.Minute)), "no DLQ listed (ErrNoDLQ)")
	assert.Empty(t, m.missing(census(map[string]int{"a": 1, "b": 2, "c": 0}), none, t0.Add(3*time.Minute)), "b back")

	assert.Equal(t, []string{"a", "b"}, m.missing(census(map[string]int{"c": 0}), none, t0.Add(4*time.Minute)))
	assert.Equal(t, []string{"a", "b"}, m.missing(census(map[string]int{"c": 0}), none, t0.Add(3*time.Minute+missingBrokerLimit-time.Second)))
	assert.Empty(t, m.missing(census(map[string]int{"c": 0}), none, t0.Add(3*time.Minute+missingBrokerLimit)), "forgotten after the limit")
	assert.Empty(t, m.missing(census(map[string]int{"a": 0, "b": 1}), none, t0.Add(2*time.Hour)))

	assert.Empty(t, m.missing(census(map[string]int{"a": 0, "b": 0}), none, t0.Add(3*time.Hour)), "b read with its letters replayed")
	assert.Empty(t, m.missing(census(map[string]int{"a": 0}), none, t0.Add(4*time.Hour)), "b held no waiting letter: its absence changes nothing")

	// A master listed but not read has no share of the DLQ any more (deleted there): its letters are gone.
	assert.Empty(t, m.missing(census(map[string]int{"a": 0, "b": 3}), none, t0.Add(5*time.Hour)))
	assert.Empty(t, m.missing(census(map[string]int{"a": 0}), map[string]bool{"a": true, "b": true}, t0.Add(5*time.Hour+time.Minute)))
	assert.Empty(t, m.missing(census(map[string]int{"a": 0}), none, t0.Add(5*time.Hour+2*time.Minute)), "b forgotten")
}

// A census cut by the monitor's stop is not a failed census: the count exported last stays; a census that
// fails while the monitor runs removes it.
func TestMonitorOnce_ACensusCutByTheStopKeepsTheLastCountAFailedOneRemovesIt(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	mon := newMonitor(MonitorConfig{Cluster: topics.Cluster{NameServers: []string{"127.0.0.1:1"}}, Metrics: m},
		dlqtool.StatusOptions{Group: "cg"})
	m.DLQLettersWaiting.WithLabelValues("cg").Set(3) // the last census

	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	mon.once(stopped)
	assert.Equal(t, 3.0, testutil.ToFloat64(m.DLQLettersWaiting.WithLabelValues("cg")), "kept through the stop")

	ctx, cancelRun := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelRun()
	mon.once(ctx) // no name server answers
	require.NoError(t, ctx.Err())
	assert.Equal(t, 0, testutil.CollectAndCount(m.DLQLettersWaiting), "removed after a failed census")
}
