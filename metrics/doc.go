// Package metrics holds rmqguard's Prometheus collectors. They are registered on a Registerer the
// application passes in (never the global default registry implicitly), so tests and several consumers
// in one process do not collide.
//
// # Sources
//
// Three sources feed Metrics: the consumer's final decisions (consumer.WithObserver(m): messages,
// duplicates, dead letters, attempts, batch retries, handlers in flight, lag, pauses, unsubscribed
// messages), the middleware chain (middleware.Metrics(m): handle duration, panics, unidentifiable messages,
// handler errors), which alone sees the chain's errors, and the dedup store (dedup.WithObserver(m):
// after-commit failures). Each message is counted in rmqguard_messages_total once, by the consumer, at its
// final decision.
//
// # The duplicate rate
//
// The duplicate rate of a group is the share of the messages it acknowledged that were duplicates:
// rate(rmqguard_duplicates_total[5m]) over the rate of
// rmqguard_messages_total{outcome=~"processed|duplicate|stale|dead_lettered|dead_letter"} (retries are not in
// it: the message comes again); deploy/prometheus/rules.yml records it.
//
// # Redis
//
// RedisFallbacks' reasons: miss (no done key), timeout, error (the lookup failed: Redis down or refusing),
// mark_failed (a done key could not be written after a commit) and skipped (not sent: the layer's
// cool-down after a failed or timed-out command). None of them fails a message; a high rate only means the
// fast path saves little.
package metrics
