package middleware

import (
	"reflect"

	"github.com/rmqguard/rmqguard/consumer"
)

// kind names one of rmqguard's standard middlewares; Chain checks their order by kind.
type kind uint8

const (
	kindUser kind = iota // a middleware Chain does not know: allowed anywhere, never called by Chain
	kindRefused
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
	return [...]string{"a user middleware", "a refused middleware", "middleware.Metrics", "middleware.Logging",
		"middleware.Recover", "middleware.Classify", "middleware.EventID", "middleware.Deadline",
		"middleware.Timeout", "middleware.Dedup", "middleware.Version", "middleware.Lease"}[k]
}

// kindOf tells a standard middleware by the code pointer of its method value (one per unexported type, the
// same for every receiver), without calling it; any other function is kindUser.
func kindOf(mw consumer.Middleware) kind {
	switch reflect.ValueOf(mw).Pointer() {
	case code((*refusedMW)(nil).wrap):
		return kindRefused
	case code((*metricsMW)(nil).wrap):
		return kindMetrics
	case code((*loggingMW)(nil).wrap):
		return kindLogging
	case code((*recoverMW)(nil).wrap):
		return kindRecover
	case code((*classifyMW)(nil).wrap):
		return kindClassify
	case code((*eventIDMW)(nil).wrap):
		return kindEventID
	case code((*deadlineMW)(nil).wrap):
		return kindDeadline
	case code((*timeoutMW)(nil).wrap):
		return kindTimeout
	case code((*dedupMW)(nil).wrap):
		return kindDedup
	case code((*versionMW)(nil).wrap):
		return kindVersion
	case code((*leaseMW)(nil).wrap):
		return kindLease
	}
	return kindUser
}

func code(mw consumer.Middleware) uintptr { return reflect.ValueOf(mw).Pointer() }

// refusedMW is a standard middleware that could not be built (e.g. Dedup with a nil store): it wraps any
// handler into consumer.Refuse(err), so Chain, or consumer.New when it is outermost, reports err.
type refusedMW struct{ err error }

func (w *refusedMW) wrap(consumer.Handler) consumer.Handler { return consumer.Refuse(w.err) }

// refuse returns a middleware that makes Chain refuse with err.
func refuse(err error) consumer.Middleware { return (&refusedMW{err: err}).wrap }

// isNil reports whether v is nil or an interface holding a nil pointer (a typed nil).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
