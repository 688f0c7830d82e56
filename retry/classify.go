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

// MySQL error numbers that the classification knows (MySQL and MariaDB share them).
const (
	// ErDupEntry is ER_DUP_ENTRY: "Duplicate entry … for key …".
	ErDupEntry uint16 = 1062
	// ErLockWaitTimeout is ER_LOCK_WAIT_TIMEOUT.
	ErLockWaitTimeout uint16 = 1205
	// ErLockDeadlock is ER_LOCK_DEADLOCK.
	ErLockDeadlock uint16 = 1213
	// ErServerShutdown is ER_SERVER_SHUTDOWN.
	ErServerShutdown uint16 = 1053
	// ErConCount is ER_CON_COUNT_ERROR: too many connections.
	ErConCount uint16 = 1040
	// ErQueryInterrupted is ER_QUERY_INTERRUPTED (e.g. KILL QUERY, max_statement_time).
	ErQueryInterrupted uint16 = 1317
	// ErBadNullError is ER_BAD_NULL_ERROR: a NOT NULL column given NULL.
	ErBadNullError uint16 = 1048
	// ErWarnDataOutOfRange is ER_WARN_DATA_OUT_OF_RANGE: a number that does not fit its column.
	ErWarnDataOutOfRange uint16 = 1264
	// ErTruncatedWrongValue is ER_TRUNCATED_WRONG_VALUE (e.g. an invalid date).
	ErTruncatedWrongValue uint16 = 1292
	// ErTruncatedWrongValueForField is ER_TRUNCATED_WRONG_VALUE_FOR_FIELD (e.g. invalid characters).
	ErTruncatedWrongValueForField uint16 = 1366
	// ErDataTooLong is ER_DATA_TOO_LONG: a string longer than its column.
	ErDataTooLong uint16 = 1406
	// ErOptionPreventsStatement is ER_OPTION_PREVENTS_STATEMENT; for a write it means the server runs
	// with read_only (e.g. a former primary after a failover).
	ErOptionPreventsStatement uint16 = 1290
	// ErCantExecuteInReadOnlyTransaction is ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION.
	ErCantExecuteInReadOnlyTransaction uint16 = 1792
	// ErReadOnlyMode is ER_READ_ONLY_MODE (MySQL: super_read_only, e.g. a replica).
	ErReadOnlyMode uint16 = 1836
	// CrServerGoneError is CR_SERVER_GONE_ERROR, a client error number ("MySQL server has gone away");
	// go-sql-driver reports it as mysql.ErrInvalidConn, proxies may pass the number on.
	CrServerGoneError uint16 = 2006
	// CrServerLost is CR_SERVER_LOST, a client error number ("Lost connection to MySQL server during
	// query"), as CrServerGoneError.
	CrServerLost uint16 = 2013
)

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
		case ErLockDeadlock, ErLockWaitTimeout, ErQueryInterrupted:
			return ClassTransient
		case ErServerShutdown, ErConCount, CrServerGoneError, CrServerLost:
			return ClassInfrastructure
		case ErBadNullError, ErWarnDataOutOfRange, ErTruncatedWrongValue, ErTruncatedWrongValueForField, ErDataTooLong:
			// The message carries data its columns cannot hold: retrying cannot help, the DLQ (and a replay
			// after the fix) can.
			return ClassPermanent
		}
		if ReadOnly(err) {
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

// IsPermanent reports whether Classify(err) is Permanent.
func IsPermanent(err error) bool { return Classify(err) == ClassPermanent }

// IsInfrastructure reports whether Classify(err) is Infrastructure.
func IsInfrastructure(err error) bool { return Classify(err) == ClassInfrastructure }
