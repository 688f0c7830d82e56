package middleware

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// maxCachedSeries bounds how many (group, topic) pairs one durationSeries keeps: far more than a consumer
// subscribes (one group, a few topics); past it, the vector is asked on every message (correct, slower).
const maxCachedSeries = 256

// seriesKey names the series of one consumer group and business topic.
type seriesKey struct{ group, topic string }

// durationSeries hands out the rmqguard_handle_duration_seconds child of each (group, topic) without the
// vector's label hashing and read lock on every message: it keeps the children it has asked the vector
// for in an immutable map behind an atomic pointer (a read is one atomic load and one map lookup); a new
// pair copies the map under mu. A child stays the vector's own series for as long as nobody deletes it
// from the vector (rmqguard never does; see metrics.Metrics.HandleDuration), so what is kept never goes
// stale. It belongs to one Metrics middleware; nothing is shared between chains.
type durationSeries struct {
	vec  *prometheus.HistogramVec
	mu   sync.Mutex
	kept atomic.Pointer[map[seriesKey]prometheus.Observer]
}

// newDurationSeries returns an empty cache over vec.
func newDurationSeries(vec *prometheus.HistogramVec) *durationSeries {
	s := &durationSeries{vec: vec}
	s.kept.Store(&map[seriesKey]prometheus.Observer{})
	return s
}

// observer returns the child of (group, topic), creating the series on first use as WithLabelValues does.
func (s *durationSeries) observer(group, topic string) prometheus.Observer {
	if o, ok := (*s.kept.Load())[seriesKey{group, topic}]; ok {
		return o
	}
	return s.keep(group, topic)
}

// keep asks the vector for the child of (group, topic) and, while fewer than maxCachedSeries pairs are
// kept, adds it to a copy of the map.
func (s *durationSeries) keep(group, topic string) prometheus.Observer {
	o := s.vec.WithLabelValues(group, topic)
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.kept.Load()
	if _, ok := old[seriesKey{group, topic}]; ok || len(old) >= maxCachedSeries {
		return o
	}
	next := make(map[seriesKey]prometheus.Observer, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[seriesKey{group, topic}] = o
	s.kept.Store(&next)
	return o
}
