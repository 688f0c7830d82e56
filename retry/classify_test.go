package retry_test

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/mysqlerr"
	"github.com/rmqguard/rmqguard/retry"
)

// wrapTwice wraps err twice with %w, as a store and a handler would.
func wrapTwice(err error) error {
	return fmt.Errorf("handler: reserve inventory: %w", fmt.Errorf("dedup: claim group cg event e-1: %w", err))
}

func TestClassify_F15_DeadlockIsTransient(t *testing.T) {
	err := wrapTwice(&mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"})
	assert.Equal(t, retry.ClassTransient, retry.Classify(err))
	assert.False(t, retry.Classify(err) == retry.ClassPermanent)
}

func TestClassify_F15_LockWaitTimeoutIsTransient(t *testing.T) {
	err := wrapTwice(&mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded; try restarting transaction"})
	assert.Equal(t, retry.ClassTransient, retry.Classify(err))
}

func TestClassify_F14_DuplicateKeyIsNotTransientOrPermanent(t *testing.T) {
	// A 1062 reaching Classify is a business-key error of the handler (the dedup row's 1062 is handled by
	// the store): it is retried until attempts run out, not dead-lettered at once.
	err := wrapTwice(&mysql.MySQLError{Number: 1062, Message: "Duplicate entry 'e-1' for key 'PRIMARY'"})
	assert.Equal(t, retry.ClassUnknown, retry.Classify(err))
}

func TestClassify_OtherTransientMySQLNumbers(t *testing.T) {
	for _, n := range []uint16{mysqlerr.ErQueryInterrupted} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			assert.Equal(t, retry.ClassTransient, retry.Classify(wrapTwice(&mysql.MySQLError{Number: n})))
		})
	}
	assert.Equal(t, retry.ClassUnknown, retry.Classify(&mysql.MySQLError{Number: 1146}), "an unknown number is unknown")
}

// F19/F20: a store that is down, overloaded or read-only is not the message's failure.
func TestClassify_F19_F20_InfrastructureMySQLNumbers(t *testing.T) {
	for _, n := range []uint16{mysqlerr.ErConCount, mysqlerr.ErServerShutdown, mysqlerr.ErOptionPreventsStatement,
		mysqlerr.ErReadOnlyMode, mysqlerr.ErCantExecuteInReadOnlyTransaction, mysqlerr.CrServerGoneError, mysqlerr.CrServerLost} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			err := wrapTwice(&mysql.MySQLError{Number: n})
			assert.Equal(t, retry.ClassInfrastructure, retry.Classify(err))
			assert.True(t, retry.Classify(err) == retry.ClassInfrastructure)
		})
	}
}

func TestInfrastructure_F19_MarkClassifiesAndKeepsTheMessage(t *testing.T) {
	base := errors.New("commit: connection reset")
	err := fmt.Errorf("dedup: %w", retry.Infrastructure(base))

	assert.Equal(t, retry.ClassInfrastructure, retry.Classify(err))
	assert.Equal(t, "commit: connection reset", retry.Infrastructure(base).Error())
	assert.ErrorIs(t, err, base)
	assert.NoError(t, retry.Infrastructure(nil))
	assert.Equal(t, retry.ClassTransient, retry.Classify(retry.Transient(retry.Infrastructure(base))), "the outermost mark wins")
	assert.Equal(t, retry.ClassInfrastructure, retry.Classify(retry.Infrastructure(&mysql.MySQLError{Number: 1062})))
}

// A value its column cannot hold (1406 data too long, 1264 out of range, …) will not fit on a retry: the
// message goes to the DLQ at once with the reason, instead of MaxAttempts redeliveries.
func TestClassify_MySQLDataErrorsArePermanent(t *testing.T) {
	for _, n := range []uint16{mysqlerr.ErBadNullError, mysqlerr.ErWarnDataOutOfRange, mysqlerr.ErTruncatedWrongValue,
		mysqlerr.ErTruncatedWrongValueForField, mysqlerr.ErDataTooLong} {
		err := wrapTwice(&mysql.MySQLError{Number: n, Message: "data error"})
		assert.Equal(t, retry.ClassPermanent, retry.Classify(err), "MySQL %d", n)
	}
}

func TestPermanent_MarkDoesNotChangeTheMessage(t *testing.T) {
	assert.Equal(t, "invalid payload", retry.Permanent(errors.New("invalid payload")).Error())
	assert.Equal(t, "db down", retry.Transient(errors.New("db down")).Error())
}

func TestClassify_PermanentMarkSurvivesWrapping(t *testing.T) {
	base := errors.New("invalid payload")
	err := fmt.Errorf("handler: %w", fmt.Errorf("decode: %w", retry.Permanent(base)))

	assert.Equal(t, retry.ClassPermanent, retry.Classify(retry.Permanent(base)))
	assert.Equal(t, retry.ClassPermanent, retry.Classify(err))
	assert.True(t, retry.Classify(err) == retry.ClassPermanent)
	assert.ErrorIs(t, err, base, "the mark keeps the cause reachable")
}

func TestClassify_PermanentOverridesTransientCause(t *testing.T) {
	// An explicit mark beats what the cause would classify as.
	err := retry.Permanent(context.DeadlineExceeded)
	assert.Equal(t, retry.ClassPermanent, retry.Classify(err))
}

func TestClassify_OutermostMarkWins(t *testing.T) {
	inner := retry.Permanent(errors.New("rejected"))

	assert.Equal(t, retry.ClassTransient, retry.Classify(retry.Transient(inner)))
	assert.Equal(t, retry.ClassTransient, retry.Classify(fmt.Errorf("outer: %w", retry.Transient(inner))))
	assert.Equal(t, retry.ClassPermanent, retry.Classify(retry.Permanent(retry.Transient(errors.New("x")))))
}

func TestClassify_TransientErrorsAreTheMessagesOwn(t *testing.T) {
	for name, err := range map[string]error{
		"deadline":         context.DeadlineExceeded,
		"wrapped deadline": fmt.Errorf("query: %w", context.DeadlineExceeded),
		"canceled":         context.Canceled,
		"net timeout":      fmt.Errorf("read: %w", timeoutErr{}),
		"deadlock":         wrapTwice(&mysql.MySQLError{Number: 1213}),
		"lock wait":        wrapTwice(&mysql.MySQLError{Number: 1205}),
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, retry.ClassTransient, retry.Classify(err))
			assert.False(t, retry.Classify(err) == retry.ClassInfrastructure)
		})
	}
}

func TestClassify_F19_LostDatabaseConnectionsAreInfrastructure(t *testing.T) {
	for name, err := range map[string]error{
		"bad conn":     fmt.Errorf("exec: %w", driver.ErrBadConn),
		"invalid conn": fmt.Errorf("exec: %w", mysql.ErrInvalidConn),
		"dedup begin":  retry.Infrastructure(fmt.Errorf("dedup: begin: connection: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})),
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, retry.ClassInfrastructure, retry.Classify(err))
		})
	}
}

// A handler's own dependency (an HTTP service) refusing or dropping connections is not the store's outage:
// the probe would find the store healthy and consumption would pause and resume over and over.
func TestClassify_F19_PlainNetworkErrorsAreTransientNotInfrastructure(t *testing.T) {
	for name, err := range map[string]error{
		"conn reset":   fmt.Errorf("read: %w", syscall.ECONNRESET),
		"conn refused": fmt.Errorf("dial: %w", syscall.ECONNREFUSED),
		"broken pipe":  syscall.EPIPE,
		"dial timeout": &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}},
		"http refused": fmt.Errorf("Post \"http://payments/charge\": %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}),
		"read timeout": &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, retry.ClassTransient, retry.Classify(err))
			assert.False(t, retry.Classify(err) == retry.ClassInfrastructure)
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassify_UnknownAndNil(t *testing.T) {
	assert.Equal(t, retry.ClassUnknown, retry.Classify(errors.New("db down")))
	assert.Equal(t, retry.ClassUnknown, retry.Classify(nil))
	assert.False(t, retry.Classify(nil) == retry.ClassPermanent)
}

func TestPermanentTransient_NilStaysNil(t *testing.T) {
	assert.NoError(t, retry.Permanent(nil))
	assert.NoError(t, retry.Transient(nil))
}

func TestPermanentf_WrapsWithW(t *testing.T) {
	base := errors.New("unknown event type")
	err := retry.Permanentf("order %s: %w", "o-1", base)

	assert.Equal(t, retry.ClassPermanent, retry.Classify(err))
	assert.ErrorIs(t, err, base)
	assert.Contains(t, err.Error(), "order o-1")
}

func TestClass_String(t *testing.T) {
	assert.Equal(t, "unknown", retry.ClassUnknown.String())
	assert.Equal(t, "transient", retry.ClassTransient.String())
	assert.Equal(t, "permanent", retry.ClassPermanent.String())
	assert.Equal(t, "infrastructure", retry.ClassInfrastructure.String())
}

func TestClassify_MarksInsideJoinedErrorsAreFound(t *testing.T) {
	// A handler that reports both its failure and a rollback failure must not lose the Permanent mark:
	// errors.Is/As walk joined errors, so the classification does too.
	permanent := retry.Permanent(errors.New("invalid payload"))
	rollback := errors.New("rollback: connection gone")

	assert.Equal(t, retry.ClassPermanent, retry.Classify(errors.Join(permanent, rollback)))
	assert.Equal(t, retry.ClassPermanent, retry.Classify(fmt.Errorf("handle: %w (rollback: %w)", permanent, rollback)))
	assert.Equal(t, retry.ClassTransient, retry.Classify(errors.Join(rollback, retry.Transient(errors.New("busy")))))
	assert.Equal(t, retry.ClassTransient, retry.Classify(retry.Transient(errors.Join(permanent))), "the outermost mark still wins")
	assert.Equal(t, retry.ClassUnknown, retry.Classify(errors.Join(errors.New("a"), errors.New("b"))))
}

// A message whose body is cut short fails to decode with io.ErrUnexpectedEOF (encoding/json's Decoder,
// gzip, encoding/binary). That is the message's own failure: classified as infrastructure it would trip
// the store health gate again and again while the store is healthy. The MySQL driver never returns
// io.ErrUnexpectedEOF (it reports a broken read as mysql.ErrInvalidConn).
func TestClassify_F19_TruncatedBodyIsNotInfrastructure(t *testing.T) {
	var v map[string]any
	decErr := json.NewDecoder(strings.NewReader(`{"eventId": "e-1", "qty": `)).Decode(&v)
	require.ErrorIs(t, decErr, io.ErrUnexpectedEOF, "the decoder reports a truncated body so")
	err := fmt.Errorf("handler: decode body: %w", decErr)

	assert.NotEqual(t, retry.ClassInfrastructure, retry.Classify(err))
	assert.Equal(t, retry.ClassTransient, retry.Classify(err), "a transient retry, until attempts run out")
}
