package retry

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/go-sql-driver/mysql"

	"github.com/rmqguard/rmqguard/internal/mysqlerr"
)

// Class is the retry class of an error.
type Class uint8

const (
	// ClassUnknown errors are retried until attempts run out. It is the zero value.
	ClassUnknown Class = iota
	// ClassTransient errors (deadlock, lock-wait timeout, lost connection, deadline) are expected to pass.
	ClassTransient
	// ClassPermanent errors can never succeed: the message goes to the DLQ at once.
	ClassPermanent
	// ClassInfrastructure errors say that the store is down or unwritable (connection refused or lost,
	// too many connections, a server shutting down, a read-only server after a failover, a failed BEGIN
	// or COMMIT). They are not the message's failure: middleware.Classify turns them into
	// consumer.Unavailable on every delivery, which pauses consumption without spending an attempt.
	ClassInfrastructure
)

// String returns "unknown", "transient", "permanent" or "infrastructure" (the class label of
// rmqguard_handler_errors_total).
func (c Class) String() string {
	switch c {
	case ClassTransient:
		return "transient"
	case ClassPermanent:
		return "permanent"
	case ClassInfrastructure:
		return "infrastructure"
	default:
		return "unknown"
	}
}

type permanentError struct{ err error }

// Error is the marked error's text: the mark is a class, not part of the message (DLQ reasons stay clean).
func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

type transientError struct{ err error }

// Error is the marked error's text.
func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// Permanent marks err as permanent: the message goes to the DLQ at once, with err as the reason.
// It returns nil for a nil err. Use it for input that can never be handled (invalid payload, unknown
// event type, a business rule that rejects the event for good).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// Transient marks err as transient: the message is retried.
// It returns nil for a nil err.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err: err}
}

type infrastructureError struct{ err error }

// Error is the marked error's text.
func (e *infrastructureError) Error() string { return e.err.Error() }
func (e *infrastructureError) Unwrap() error { return e.err }

// Infrastructure marks err as an infrastructure error: the store (or the broker) could not do its part,
// through no fault of the message — e.g. a failed BEGIN or COMMIT (the dedup store marks those). The
// message is not retried as failed: consumption pauses until the store answers again. It returns nil
// for a nil err.
func Infrastructure(err error) error {
	if err == nil {
		return nil
	}
	return &infrastructureError{err: err}
}

// Permanentf is Permanent(fmt.Errorf(format, args...)); %w works as in fmt.Errorf.
func Permanentf(format string, args ...any) error {
	return Permanent(fmt.Errorf(format, args...))
}

// Classify returns the class of err: the outermost explicit mark (Permanent, Transient, Infrastructure)
// wins; then MySQL error numbers, lost connections, network errors, timeouts and cancellation, in the order
// and with the classes the package doc lists; anything else, and a nil err, is ClassUnknown.
func Classify(err error) Class {
	if err == nil {
		return ClassUnknown
	}
	if c, ok := mark(err); ok {
		return c
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case mysqlerr.ErLockDeadlock, mysqlerr.ErLockWaitTimeout, mysqlerr.ErQueryInterrupted:
			return ClassTransient
		case mysqlerr.ErServerShutdown, mysqlerr.ErConCount, mysqlerr.CrServerGoneError, mysqlerr.CrServerLost:
			return ClassInfrastructure
		case mysqlerr.ErBadNullError, mysqlerr.ErWarnDataOutOfRange, mysqlerr.ErTruncatedWrongValue, mysqlerr.ErTruncatedWrongValueForField, mysqlerr.ErDataTooLong:
			// The message carries data its columns cannot hold: retrying cannot help, the DLQ (and a replay
			// after the fix) can.
			return ClassPermanent
		}
		if mysqlerr.ReadOnly(err) {
			return ClassInfrastructure
		}
	}
	if connectionLost(err) {
		return ClassInfrastructure
	}
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE),
		errors.As(err, &op):
		return ClassTransient
	case errors.As(err, &ne) && ne.Timeout():
		return ClassTransient
	}
	return ClassUnknown
}

// connectionLost reports whether err says a database connection was lost or could not be used: the
// errors database/sql drivers (driver.ErrBadConn) and the MySQL driver (mysql.ErrInvalidConn) give.
func connectionLost(err error) bool {
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn)
}

// mark returns the class of the outermost Permanent, Transient or Infrastructure mark in err's tree, walked depth-first
// like errors.As does, so that marks inside errors.Join or a multi-%w fmt.Errorf are found too.
func mark(err error) (Class, bool) {
	switch e := err.(type) {
	case *permanentError:
		return ClassPermanent, true
	case *transientError:
		return ClassTransient, true
	case *infrastructureError:
		return ClassInfrastructure, true
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return mark(inner)
		}
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if c, ok := mark(inner); ok {
				return c, true
			}
		}
	}
	return ClassUnknown, false
}
