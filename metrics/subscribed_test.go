package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/metrics"
)

// Subscribed creates every counter series of a group's topics at zero, so that rate() sees the first
// increment and a group without duplicates has ratio 0 (series that appear at 1 lose it).
func TestSubscribed_CreatesTheCounterSeriesAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	require.NoError(t, err)
	var _ interface{ Subscribed(string, []string) } = m // what the consumer calls at Start

	m.Subscribed("cg", []string{"ORDER", "PAY"})

	assert.Equal(t, 2*9, testutil.CollectAndCount(m.Messages), "every outcome of both topics")
	assert.Equal(t, 2*4, testutil.CollectAndCount(m.Duplicates), "redelivery, resend, replay, unknown of both topics")
	assert.Equal(t, 2*8, testutil.CollectAndCount(m.DeadLetters), "every reason class of both topics")
	assert.Zero(t, testutil.ToFloat64(m.DeadLetters.WithLabelValues("cg", "ORDER", "version_gap")))
	assert.Equal(t, 2, testutil.CollectAndCount(m.Stale), "rmqguard_stale_total of both topics")
	assert.Equal(t, 2, testutil.CollectAndCount(m.BatchRetried))
	assert.Equal(t, 2, testutil.CollectAndCount(m.UnsubscribedMessages))
	assert.Equal(t, 1, testutil.CollectAndCount(m.AfterCommitFailures), "rmqguard_after_commit_failures_total of the group")
	assert.Equal(t, 1, testutil.CollectAndCount(m.LeaseTakeovers), "rmqguard_lease_takeovers_total of the group")
	for _, c := range []string{"redelivery", "resend", "replay", "unknown"} {
		assert.Zero(t, testutil.ToFloat64(m.Duplicates.WithLabelValues("cg", "PAY", c)), c)
	}
	assert.Zero(t, testutil.ToFloat64(m.Messages.WithLabelValues("cg", "ORDER", "processed")))
}
