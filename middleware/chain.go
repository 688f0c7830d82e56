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
// where events carry aggregate versions, turns away stale events inside that transaction. Standard builds
// this chain in one call; Chain refuses a wrong order of these middlewares when it builds a chain.
package middleware

import (
	"errors"
	"fmt"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
)

// ErrChainOrder marks Chain's refusal of a wrong order of rmqguard's standard middlewares (a middleware
// without the one it needs outside it, the same middleware twice, a dedup.Handle handler without Dedup);
// test it with errors.Is. The message names the middlewares, their positions (1 = outermost) and the fix.
var ErrChainOrder = errors.New("middleware chain in the wrong order")

// ErrNilDependency marks a middleware or handler built from a nil dependency (Dedup with a nil store,
// Metrics with nil metrics, a nil handler or middleware); test it with errors.Is.
var ErrNilDependency = errors.New("nil dependency")

// chainError is a refused order: msg is the message, Is matches ErrChainOrder.
type chainError struct{ msg string }

func (e *chainError) Error() string        { return e.msg }
func (e *chainError) Is(target error) bool { return target == ErrChainOrder }

func orderErr(format string, args ...any) error {
	return &chainError{msg: fmt.Sprintf(format, args...)}
}

// Chain wraps h in mws; the first middleware is the outermost, so Chain(h, a, b) runs a, then b, then h.
//
// It checks the chain once, at build time, and returns consumer.Refuse(err) instead when it is wrong, so
// consumer.New fails with err ("consumer.New: handler: …") rather than every message going to the DLQ.
// It knows rmqguard's standard middlewares by identity (never calling them) and refuses, with an error
// wrapping ErrChainOrder that says what to move where:
//   - Dedup without EventID before it (Dedup needs the event ID EventID sets);
//   - Version without Dedup before it (Version runs inside the dedup transaction);
//   - Timeout outside Recover. Timeout recovers a panic on its own goroutine itself and returns it as a
//     *PanicError, so none escapes either way; the rule keeps Recover, which logs each panic once with the
//     handler's stack, on the consumer's goroutine around Timeout and whatever sits between them, as in the
//     recommended order (a Recover inside Timeout runs on Timeout's per-message goroutine);
//   - Dedup without Classify anywhere in the chain (a permanent error, e.g. MySQL 1406 or an undecodable
//     body, would be retried on every delivery, then dead-lettered by the broker without its reason);
//   - a handler made by dedup.Handle (dedup.IsTxHandler) without Dedup in the chain;
//   - a standard middleware twice (Deadline and Timeout count as one), except Version: each checks only its
//     VersionConfig.EventTypes, so a chain may hold one Version per aggregate type, all after Dedup.
//
// A middleware built from a nil dependency (Dedup(nil), Metrics(nil)) or a nil h or middleware is refused
// with an error wrapping ErrNilDependency; a refused h (consumer.Refuse) is returned as it is. Other
// middlewares are allowed anywhere and are not called by the check. A chain composed by hand (mw(h))
// is not checked. Each Chain call is checked alone: a Chain used as a part of another chain (e.g. a
// router's branch, Chain(h, Dedup(store)) inside a chain that has EventID) is refused for what only the
// outer chain provides; build the whole chain in one Chain call, or compose such a part by hand. The handler Chain returns costs nothing more per message than the wrapped chain.
func Chain(h consumer.Handler, mws ...consumer.Middleware) consumer.Handler {
	if consumer.Refused(h) != nil {
		return h
	}
	if err := checkChain(h, mws); err != nil {
		return consumer.Refuse(err)
	}
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// checkChain returns why h wrapped in mws (outermost first) must not run, or nil.
func checkChain(h consumer.Handler, mws []consumer.Middleware) error {
	if h == nil {
		return fmt.Errorf("%w: middleware.Chain: the handler is nil", ErrNilDependency)
	}
	pos := map[kind]int{} // 1-based position of each standard middleware
	for i, mw := range mws {
		if mw == nil {
			return fmt.Errorf("%w: middleware.Chain: the middleware at position %d is nil", ErrNilDependency, i+1)
		}
		k := kindOf(mw)
		switch k {
		case kindUser:
			continue
		case kindRefused:
			return fmt.Errorf("position %d: %w", i+1, consumer.Refused(mw(nil)))
		}
		if _, seen := pos[kindVersion]; seen && k == kindVersion {
			continue // one Version per aggregate type; the first one's position is the one checked
		}
		slot := k
		if k == kindTimeout {
			slot = kindDeadline // one deadline middleware per chain
		}
		if p, ok := pos[slot]; ok {
			return orderErr("%s (position %d) repeats %s (position %d): keep one of them", k, i+1, kindAt(mws, p), p)
		}
		pos[slot] = i + 1
		if k == kindTimeout {
			pos[kindTimeout] = i + 1
		}
	}
	return checkOrder(h, pos)
}

// checkOrder applies Chain's order rules to the positions of the standard middlewares.
func checkOrder(h consumer.Handler, pos map[kind]int) error {
	if d, ok := pos[kindDedup]; ok && !before(pos, kindEventID, d) {
		return orderErr("middleware.Dedup (position %d) needs middleware.EventID before it: %s", d, fix(pos, kindEventID, "EventID", "Dedup"))
	}
	if d, ok := pos[kindDedup]; ok {
		if _, ok := pos[kindClassify]; !ok {
			return orderErr("middleware.Dedup (position %d) needs middleware.Classify in the chain: add it before EventID "+
				"(without it a permanent error is retried on every delivery and then moved to the DLQ by the broker, without its reason)", d)
		}
	}
	if v, ok := pos[kindVersion]; ok && !before(pos, kindDedup, v) {
		return orderErr("middleware.Version (position %d) needs middleware.Dedup before it: %s", v, fix(pos, kindDedup, "Dedup", "Version"))
	}
	if t, ok := pos[kindTimeout]; ok {
		if r, ok := pos[kindRecover]; ok && r > t {
			return orderErr("middleware.Timeout (position %d) must be inside middleware.Recover (position %d): move Recover before Timeout", t, r)
		}
	}
	if _, ok := pos[kindDedup]; !ok && dedup.IsTxHandler(h) {
		return orderErr("the handler is a dedup.Handle transactional handler and needs the dedup transaction: add middleware.Dedup(store) to the chain, after EventID")
	}
	return nil
}

// before reports whether k is in the chain at a position before p.
func before(pos map[kind]int, k kind, p int) bool {
	q, ok := pos[k]
	return ok && q < p
}

// fix says how to put the middleware named need (of kind k) before the one named by.
func fix(pos map[kind]int, k kind, need, by string) string {
	if _, ok := pos[k]; ok {
		return fmt.Sprintf("move %s before %s", need, by)
	}
	return fmt.Sprintf("add middleware.%s before %s", need, by)
}

// kindAt is the kind of the middleware at 1-based position p.
func kindAt(mws []consumer.Middleware, p int) kind { return kindOf(mws[p-1]) }
