package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/metrics"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/retry"
)

// newMetrics registers rmqguard's collectors on a fresh registry.
func newMetrics(t *testing.T) *metrics.Metrics {
	t.Helper()
	m, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	return m
}

// scripted is a business handler whose behaviour is picked by the message's EVENT_ID.
func scripted(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
	switch d.EventID {
	case "dup":
		return consumer.Duplicate(), nil
	case "stale":
		return consumer.Stale("v5 < v7"), nil
	case "panic":
		panic("handler bug")
	case "fail":
		return consumer.Outcome{}, errors.New("db down")
	case "poison":
		return consumer.Outcome{}, retry.Permanent(errors.New("invalid payload"))
	default:
		return consumer.Processed(), nil
	}
}

func TestMetrics_CountsPanicsUnidentifiableAndErrorsButNotMessages(t *testing.T) {
	m := newMetrics(t)
	eid, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	h := testenv.Must(middleware.Chain(consumer.HandlerFunc(scripted), testenv.Must(middleware.Metrics(m)), middleware.Recover(zap.NewNop()), middleware.Classify(), eid))

	for _, id := range []string{"ok-1", "ok-2", "dup", "dup", "dup", "stale", "panic", "fail", "poison", ""} {
		props := map[string]string{}
		if id != "" {
			props["EVENT_ID"] = id
		}
		_, _ = h.Handle(context.Background(), delivery("ORDER", "", props))
	}

	count := func(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }
	assert.Equal(t, 0, testutil.CollectAndCount(m.Messages), "messages are counted once, by the consumer's final decision")
	assert.Equal(t, 0, testutil.CollectAndCount(m.Duplicates), "duplicates are counted by the consumer's final decision")
	assert.Equal(t, 1.0, count(m.Panics.WithLabelValues("cg", "ORDER")))
	assert.Equal(t, 1.0, count(m.Unidentifiable.WithLabelValues("cg", "ORDER")))
	assert.Equal(t, 2.0, count(m.Errors.WithLabelValues("cg", "ORDER", "permanent")), "poison and unidentifiable")
	assert.Equal(t, 2.0, count(m.Errors.WithLabelValues("cg", "ORDER", "unknown")), "panic and db down")
	assert.Equal(t, 1, testutil.CollectAndCount(m.HandleDuration), "one duration series for cg/ORDER")
	var hist dto.Metric
	require.NoError(t, m.HandleDuration.WithLabelValues("cg", "ORDER").(prometheus.Histogram).Write(&hist))
	assert.Equal(t, uint64(10), hist.GetHistogram().GetSampleCount(), "every message's duration is observed")
}

func TestMetrics_F4_LabelsUseTheRestoredTopic(t *testing.T) {
	m := newMetrics(t)
	h := testenv.Must(middleware.Metrics(m)).Wrap(returning(consumer.Outcome{}, errors.New("db down")))
	retried := msg("%RETRY%cg", "", map[string]string{"EVENT_ID": "e-1", "RETRY_TOPIC": "ORDER"})
	retried.ReconsumeTimes = 1

	_, err := h.Handle(context.Background(), testenv.NewDelivery("cg", retried))

	require.Error(t, err)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Errors.WithLabelValues("cg", "ORDER", "unknown")))
	assert.Equal(t, 1, testutil.CollectAndCount(m.Errors), "no series for the retry topic")
	assert.Equal(t, 1, testutil.CollectAndCount(m.HandleDuration), "no duration series for the retry topic")
}

func TestMetrics_ReturnsTheInnerResultUnchanged(t *testing.T) {
	m := newMetrics(t)
	cause := errors.New("db down")

	o, err := testenv.Must(middleware.Metrics(m)).Wrap(returning(consumer.Retry(3, "db down"), cause)).Handle(context.Background(), delivery("ORDER", "", nil))

	assert.Equal(t, consumer.Retry(3, "db down"), o)
	assert.Same(t, cause, err)
}

func TestMetrics_OneDurationSeriesPerGroupAndTopicBeyondTheKeptOnes(t *testing.T) {
	m := newMetrics(t)
	h := testenv.Must(middleware.Metrics(m)).Wrap(returning(consumer.Processed(), nil))
	const groups, topics, perPair = 2, 150, 3 // 300 pairs: more than the middleware keeps (256)
	var wg sync.WaitGroup
	for w := range 4 { // concurrent first uses of the same pairs
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < groups*topics*perPair; i += 4 {
				pair := i % (groups * topics)
				d := testenv.NewDelivery(fmt.Sprintf("cg-%d", pair%groups), msg(fmt.Sprintf("T-%d", pair/groups), "", nil))
				_, _ = h.Handle(context.Background(), d)
			}
		}()
	}
	wg.Wait()

	require.Equal(t, groups*topics, testutil.CollectAndCount(m.HandleDuration))
	for pair := range groups * topics {
		var hist dto.Metric
		series := m.HandleDuration.WithLabelValues(fmt.Sprintf("cg-%d", pair%groups), fmt.Sprintf("T-%d", pair/groups))
		require.NoError(t, series.(prometheus.Histogram).Write(&hist))
		assert.Equal(t, uint64(perPair), hist.GetHistogram().GetSampleCount(), "pair %d", pair)
	}
}
