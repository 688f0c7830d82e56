package middleware

import (
	"reflect"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
)

// Middleware wraps a consumer.Handler with a step around it; Chain composes them. Build one with a
// standard constructor (Dedup, Recover, …) or, for a step of your own, with Func.
type Middleware struct {
	kind  kind
	wrap  func(next consumer.Handler) consumer.Handler
	store dedup.TxStore // Dedup's and Lease's store, whose concurrency check Chain passes to consumer.New
	lease time.Duration // Lease's lease
}

// Func returns f as a Middleware that Chain does not know: allowed anywhere in a chain, never called by
// Chain's check.
func Func(f func(next consumer.Handler) consumer.Handler) Middleware {
	return Middleware{kind: kindUser, wrap: f}
}

// Wrap returns next wrapped in m: a chain composed by hand, which Chain's checks do not see.
func (m Middleware) Wrap(next consumer.Handler) consumer.Handler { return m.wrap(next) }

// kind names one of rmqguard's standard middlewares; Chain checks their order by kind.
type kind uint8

const (
	kindUser kind = iota // a middleware Chain does not know: allowed anywhere, never called by Chain
	kindMetrics
	kindLogging
	kindRecover
	kindClassify
	kindEventID
	kindDeadline
	kindTimeout
	kindDedup
	kindVersion
	kindLease // Dedup in lease mode: takes Dedup's place in the order rules
)

// String returns the constructor's name, e.g. "middleware.Dedup".
func (k kind) String() string {
	return [...]string{"a user middleware", "middleware.Metrics", "middleware.Logging",
		"middleware.Recover", "middleware.Classify", "middleware.EventID", "middleware.Deadline",
		"middleware.Timeout", "middleware.Dedup", "middleware.Version", "middleware.Lease"}[k]
}

// isNil reports whether v is nil or an interface holding a nil pointer (a typed nil).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
