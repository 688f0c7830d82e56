package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// RedisFallbacks counts the Redis fast path's fall-throughs to the database, by reason:
// rmqguard_redis_fallbacks_total{reason}, reason miss, timeout, error, mark_failed or skipped (the package
// doc, "Redis"). It implements redisfast.Observer, apart from Metrics so that consumers without the fast
// path export nothing about Redis.
type RedisFallbacks struct {
	// Total is rmqguard_redis_fallbacks_total{reason}.
	Total *prometheus.CounterVec
}

// NewRedisFallbacks creates the counter and registers it on reg. It returns an error, wrapped, when reg is
// nil or the name is already registered there.
func NewRedisFallbacks(reg prometheus.Registerer) (*RedisFallbacks, error) {
	if reg == nil {
		return nil, fmt.Errorf("metrics: NewRedisFallbacks: Registerer is nil")
	}
	r := &RedisFallbacks{Total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rmqguard_redis_fallbacks_total",
		Help: "Redis fast-path lookups or done-key writes that fell through to the database, by reason.",
	}, []string{labelReason})}
	if err := reg.Register(r.Total); err != nil {
		return nil, fmt.Errorf("metrics: register: %w", err)
	}
	return r, nil
}

// RedisFallback counts one fall-through of reason.
func (r *RedisFallbacks) RedisFallback(reason string) { r.Total.WithLabelValues(reason).Inc() }
