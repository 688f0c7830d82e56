package dedup

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A statement that may end or commit the transaction without failing is a doubt (Confirm then reads the
// dedup row back); only plain DML is not.
func TestF15_OnlyPlainDMLLeavesNoDoubt(t *testing.T) {
	for q, plain := range map[string]bool{
		"SELECT 1": true, "  \n\tinsert INTO t VALUES (1)": true, "Update t SET a = 1": true, "DELETE FROM t": true,
		"REPLACE INTO t VALUES (1)": true, "WITH c AS (SELECT 1) SELECT * FROM c": true, "(SELECT 1) UNION (SELECT 2)": true,
		"SAVEPOINT s1": true, "DO SLEEP(0)": true, "VALUES (1)": true, "TABLE t": true,
		"ROLLBACK": false, "rollback to savepoint s1": false, "COMMIT": false, "BEGIN": false, "START TRANSACTION": false,
		"SET autocommit = 1": false, "CREATE TABLE x (a INT)": false, "TRUNCATE t": false, "LOCK TABLES t WRITE": false,
		"CALL p()": false, "/* c */ SELECT 1": false, "-- c\nSELECT 1": false, "": false, "SELECTX 1": false,
		"XA START 'x'": false, "ALTER TABLE t ADD b INT": false,
	} {
		assert.Equal(t, plain, plainDML(q), "%q", q)
	}
}
