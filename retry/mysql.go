package retry

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
