package main

import (
	"os"
	"testing"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// TestMain points the CLI's default database (RMQGUARD_MYSQL_DSN, which `source deploy/local/env.sh` sets to the
// demo database) at the test database, which the tests migrate through testenv.MySQL: a test never reads or
// writes the demo database, and never depends on another package having migrated it.
func TestMain(m *testing.M) {
	if err := os.Setenv(envMySQLDSN, testenv.MySQLDSN()); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
