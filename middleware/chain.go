// Package middleware holds Chain and rmqguard's standard middlewares. A typical chain, outermost first:
//
//	Metrics → Recover → Classify → EventID → Deadline → Dedup → [Version] → business handler
//
// Metrics sees the chain's outcome of each run (the consumer then reports each message's final decision,
// after a batch is combined and dead letters are published, to its Observer and, in one line per message,
// to its log: consumer.WithLogger); Logging, a debug-only trace of each run, goes right after Metrics when
// wanted; Recover turns a panic anywhere inside into a retry;
// Classify turns errors into retry or dead-letter outcomes; EventID finds the idempotency key;
// Deadline reports a run that outlived the consumer's HandlerTimeout (or a shorter deadline of its own) as a
// timeout, inline — Timeout, in its place, only for handlers that ignore their context, at a goroutine per
// message; Dedup runs the handler in one transaction with the dedup row; Version,
// where events carry aggregate versions, turns away stale events inside that transaction.
package middleware

import "github.com/rmqguard/rmqguard/consumer"

// Chain wraps h in mws; the first middleware is the outermost, so Chain(h, a, b) runs a, then b, then h.
func Chain(h consumer.Handler, mws ...consumer.Middleware) consumer.Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}
