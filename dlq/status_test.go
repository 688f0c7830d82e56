package dlq_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dlq"
	"github.com/rmqguard/rmqguard/metrics"
)

// F42: a letter's status is its audit row (keyed by the group in its namespace and the store ID) and the
// processed check of its event in the scope; it waits for an operator unless a replay sent it or its event
// was processed. A failed or uncertain replay leaves it waiting; a letter without event ID is never processed.
func TestStatuses_AuditRowAndProcessedDecideWhetherALetterWaits(t *testing.T) {
	audit := newFakeAudit()
	audit.put(dlq.AuditRecord{Group: "ns%g", StoreID: "S-sent", Status: dlq.AuditSent, ReplayedBy: "alice"})
	audit.put(dlq.AuditRecord{Group: "ns%g", StoreID: "S-failed", Status: dlq.AuditFailed})
	audit.put(dlq.AuditRecord{Group: "ns%g", StoreID: "S-sending", Status: dlq.AuditSending})
	audit.put(dlq.AuditRecord{Group: "g", StoreID: "S-other-ns", Status: dlq.AuditSent})
	processed := fakeProcessed{"scope/e-sent": true, "scope/e-done": true}
	letters := []dlq.Letter{
		{StoreID: "S-sent", EventID: "e-sent"}, {StoreID: "S-failed", EventID: "e-failed"},
		{StoreID: "S-sending", EventID: "e-sending"}, {StoreID: "S-done", EventID: "e-done"},
		{StoreID: "S-other-ns", EventID: "e-x"}, {StoreID: "S-no-event"},
	}
	st, err := dlq.Statuses(context.Background(), letters, dlq.StatusOptions{Group: "g", Namespace: "ns", Scope: "scope",
		Audit: audit, Processed: processed})
	require.NoError(t, err)
	require.Len(t, st, len(letters))
	require.NotNil(t, st[0].Replay)
	assert.Equal(t, "alice", st[0].Replay.ReplayedBy)
	assert.Nil(t, st[4].Replay, "the audit is keyed by the group in its namespace")
	var waiting, processedFlags []bool
	for _, s := range st {
		waiting = append(waiting, s.Waiting())
		processedFlags = append(processedFlags, s.Processed)
	}
	assert.Equal(t, []bool{false, true, true, false, true, true}, waiting)
	assert.Equal(t, []bool{true, false, false, true, false, false}, processedFlags)

	_, err = dlq.Statuses(context.Background(), letters, dlq.StatusOptions{Group: "g", Processed: processed})
	assert.ErrorContains(t, err, "Audit is required")
}

// NewMonitor names the missing or invalid field before anything runs.
func TestNewMonitor_NamesTheInvalidField(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	ok := dlq.MonitorConfig{Cluster: dlq.Cluster{NameServers: []string{"127.0.0.1:9876"}},
		Status:  dlq.StatusOptions{Group: "g", Audit: newFakeAudit(), Processed: fakeProcessed{}},
		Metrics: m}
	_, err = dlq.NewMonitor(ok)
	require.NoError(t, err)
	for want, mutate := range map[string]func(*dlq.MonitorConfig){
		"no name server":        func(c *dlq.MonitorConfig) { c.Cluster.NameServers = nil },
		"Group is required":     func(c *dlq.MonitorConfig) { c.Status.Group = "" },
		"Processed is required": func(c *dlq.MonitorConfig) { c.Status.Processed = nil },
		"Metrics is required":   func(c *dlq.MonitorConfig) { c.Metrics = nil },
		"Interval -1s":          func(c *dlq.MonitorConfig) { c.Interval = -1e9 },
	} {
		c := ok
		mutate(&c)
		_, err := dlq.NewMonitor(c)
		assert.ErrorContains(t, err, want)
	}
}

// F42: the Monitor exports the letters waiting (0 for a group whose DLQ does not exist yet), and removes the
// series when a census fails (here: no name server answers) instead of exporting a stale or partial count.
func TestMonitor_ExportsTheCountAndRemovesItWhenTheCensusFails(t *testing.T) {
	w := newDLQWorld(t, 0, 0)
	for _, c := range []struct {
		name    string
		cluster dlq.Cluster
		present bool
	}{{"no DLQ yet", w.cluster, true}, {"census fails", dlq.Cluster{NameServers: []string{"127.0.0.1:1"}}, false}} {
		t.Run(c.name, func(t *testing.T) {
			m, err := metrics.New(prometheus.NewRegistry())
			require.NoError(t, err)
			m.DLQLettersWaiting.WithLabelValues(w.group).Set(7) // a value from before
			mon, err := dlq.NewMonitor(dlq.MonitorConfig{Cluster: c.cluster, Metrics: m,
				Status: dlq.StatusOptions{Group: w.group, Audit: newFakeAudit(), Processed: fakeProcessed{}}})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(w.ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = mon.Run(ctx) }()
			require.Eventually(t, func() bool {
				n := testutil.CollectAndCount(m.DLQLettersWaiting)
				return c.present && n == 1 && testutil.ToFloat64(m.DLQLettersWaiting.WithLabelValues(w.group)) == 0 || !c.present && n == 0
			}, 20*time.Second, 50*time.Millisecond)
			cancel()
			<-done
		})
	}
}

// F42: a DLQ topic deleted on a broker that is up (an operator purging the letters) is no letter, not a
// missing broker: the Monitor's count drops to 0 at once. (A master that is down is withheld instead.)
func TestMonitor_ADLQDeletedOnABrokerThatIsUpCountsNoLetter(t *testing.T) {
	w := newDLQWorld(t, 6, 1)
	w.publish(letter{eventID: w.group + "-e1", reason: "poison"})
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	mon, err := dlq.NewMonitor(dlq.MonitorConfig{Cluster: w.cluster, Metrics: m, Interval: 200 * time.Millisecond,
		Status: dlq.StatusOptions{Group: w.group, Audit: newFakeAudit(), Processed: fakeProcessed{}}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = mon.Run(ctx) }()
	defer func() { cancel(); <-done }()
	gauge := func() float64 {
		if testutil.CollectAndCount(m.DLQLettersWaiting) == 0 {
			return -1
		}
		return testutil.ToFloat64(m.DLQLettersWaiting.WithLabelValues(w.group))
	}
	require.Eventually(t, func() bool { return gauge() == 1 }, 20*time.Second, 50*time.Millisecond)

	w.deleteDLQ()
	require.Eventually(t, func() bool { return gauge() == 0 }, 20*time.Second, 50*time.Millisecond,
		"the letters were deleted with the topic on a broker that is up")
}

// F42: a letter replayed from an edited export file (its event ID changed) is processed when the replay's
// event is: the audit row's event ID, not the letter's, is checked for a letter a replay sent.
func TestStatuses_AnEditedReplayIsProcessedUnderTheEventIDItWasSentWith(t *testing.T) {
	audit := newFakeAudit()
	audit.put(dlq.AuditRecord{Group: "g", StoreID: "S-edited", EventID: "e-new", Status: dlq.AuditSent})
	audit.put(dlq.AuditRecord{Group: "g", StoreID: "S-failed", EventID: "e-new2", Status: dlq.AuditFailed})
	processed := fakeProcessed{"g/e-new": true, "g/e-new2": true}
	letters := []dlq.Letter{{StoreID: "S-edited", EventID: "e-orig"}, {StoreID: "S-failed", EventID: "e-orig2"}}
	st, err := dlq.Statuses(context.Background(), letters, dlq.StatusOptions{Group: "g", Audit: audit, Processed: processed})
	require.NoError(t, err)
	assert.True(t, st[0].Processed, "the replay sent e-new, which is processed")
	assert.False(t, st[1].Processed, "a failed replay sent nothing: the letter's own event is checked")
}
