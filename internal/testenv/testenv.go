// Package testenv connects tests to the real services that deploy/local (or docker-compose) starts. When a
// service is missing a test is skipped, unless RMQGUARD_REQUIRE_SERVICES=1 (as in CI), where it fails.
package testenv

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // the MySQL driver for sqlx
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/pending"
)

// Defaults of the environment variables the tests read (the same as deploy/local/env.sh).
const (
	DefaultMySQLDSN   = "rmqguard:rmqguard@tcp(127.0.0.1:3306)/rmqguard_test?parseTime=true"
	DefaultNameServer = "127.0.0.1:9876"
	DefaultBroker     = "127.0.0.1:10911"
)

// Env returns the environment variable name, or def when it is unset or empty.
func Env(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

// Unavailable skips the test, or fails it when RMQGUARD_REQUIRE_SERVICES=1.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("RMQGUARD_REQUIRE_SERVICES") == "1" {
		t.Fatalf("required service unavailable (RMQGUARD_REQUIRE_SERVICES=1): "+format, args...)
	}
	t.Skipf("service unavailable (run `make up`): "+format, args...)
}

// MySQLDSN returns the test database's DSN: RMQGUARD_TEST_MYSQL_DSN, or DefaultMySQLDSN.
func MySQLDSN() string { return Env("RMQGUARD_TEST_MYSQL_DSN", DefaultMySQLDSN) }

// MySQL opens the test database (RMQGUARD_TEST_MYSQL_DSN), applies the dedup schema and closes it when
// the test ends (the example domain's tables: examples/shop/shoptest).
func MySQL(t testing.TB) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("mysql", MySQLDSN())
	if err != nil {
		t.Fatalf("open mysql: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		Unavailable(t, "MariaDB at RMQGUARD_TEST_MYSQL_DSN: %v", err)
	}
	db.SetMaxOpenConns(64)
	if _, err := dedup.Migrate(context.Background(), db.DB); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db
}

// NameServer returns the name server address (RMQGUARD_NAMESRV) after checking that it accepts TCP.
func NameServer(t testing.TB) string {
	t.Helper()
	return reachable(t, "RMQGUARD_NAMESRV", DefaultNameServer)
}

// Broker returns the broker address (RMQGUARD_BROKER_ADDR) after checking that it accepts TCP.
func Broker(t testing.TB) string {
	t.Helper()
	return reachable(t, "RMQGUARD_BROKER_ADDR", DefaultBroker)
}

func reachable(t testing.TB, name, def string) string {
	addr := Env(name, def)
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		Unavailable(t, "%s=%s: %v", name, addr, err)
		return ""
	}
	_ = conn.Close()
	return addr
}

// Unique returns prefix + "-" + 12 random hex characters, for event IDs, groups and topics that no other
// test run shares.
func Unique(prefix string) string {
	return prefix + "-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
}

// Must returns v, or panics with err: for a constructor a test cannot go on without.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Refused returns why a handler is refused: the error of its construction (err), else the refusal
// consumer.New would report (pending.Refused).
func Refused(h consumer.Handler, err error) error {
	if err != nil {
		return err
	}
	return pending.Refused(h)
}
