// Package mysqlerr names the MySQL (and MariaDB) error numbers rmqguard reacts to, and reads the two that
// need more than a number: a duplicate key (which key) and a read-only server. The error number, never the
// message text, decides.
package mysqlerr

import (
	"errors"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// DuplicateKey reports whether err is (or wraps) MySQL error 1062, found with errors.As, and returns the
// name of the violated key as the server reports it, without a table prefix: MySQL 8 says
// "for key 'processed_event.PRIMARY'", MariaDB and MySQL 5.7 say "for key 'PRIMARY'"; both give "PRIMARY".
// The key name is "" when the server's message does not carry one. The error number, not the text,
// decides whether it is a duplicate.
func DuplicateKey(err error) (key string, ok bool) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != ErDupEntry {
		return "", false
	}
	return keyName(me.Message), true
}

// keyName takes the last quoted token after "for key" in a 1062 message, dropping a "table." prefix.
func keyName(msg string) string {
	i := strings.LastIndex(msg, "for key ")
	if i < 0 {
		return ""
	}
	k := strings.TrimSpace(msg[i+len("for key "):])
	k = strings.Trim(k, "'`\"")
	return k[strings.LastIndexByte(k, '.')+1:] // no dot: LastIndexByte is -1, k is kept whole
}

// MissingTable reports whether err is (or wraps) MySQL error 1146: a table the statement names does not
// exist.
func MissingTable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == ErNoSuchTable
}

// ReadOnly reports whether err is (or wraps) a MySQL error saying the server refuses writes because it is
// read-only: 1290 (read_only, MariaDB and MySQL), 1836 (MySQL super_read_only / read-only mode) or 1792
// (a write in a read-only transaction). A connection that saw one is still talking to a former primary
// after a failover; the dedup store closes it instead of returning it to the pool.
func ReadOnly(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case ErOptionPreventsStatement, ErReadOnlyMode, ErCantExecuteInReadOnlyTransaction:
		return true
	}
	return false
}

// MySQL error numbers that the classification knows (MySQL and MariaDB share them).
const (
	// ErDupEntry is ER_DUP_ENTRY: "Duplicate entry … for key …".
	ErDupEntry uint16 = 1062
	// ErNoSuchTable is ER_NO_SUCH_TABLE.
	ErNoSuchTable uint16 = 1146
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
