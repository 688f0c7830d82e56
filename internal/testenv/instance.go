package testenv

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// Instance is a MariaDB server of a test's own (deploy/local/mariadb-instance.sh), which the test may
// stop, restart or make read-only without touching the shared one.
type Instance struct {
	t    testing.TB
	name string
	// DSN is the go-sql-driver DSN of database rmqguard as user rmqguard (no SUPER: read_only applies).
	DSN string
}

// MariaDBInstance starts (or reuses) the instance name on 127.0.0.1:port and removes it, data included,
// when the test ends. It fails the test when the script fails (MariaDB not installed: run `make up`).
func MariaDBInstance(t testing.TB, name string, port int) *Instance {
	t.Helper()
	in := &Instance{t: t, name: name}
	t.Cleanup(func() { in.run("remove") })
	out := in.run("start", strconv.Itoa(port))
	in.DSN = strings.TrimSpace(out)
	return in
}

// Open opens the instance's database and closes it when the test ends.
func (in *Instance) Open() *sqlx.DB {
	in.t.Helper()
	db, err := sqlx.Open("mysql", in.DSN)
	if err != nil {
		in.t.Fatalf("open %s: %v", in.name, err)
	}
	in.t.Cleanup(func() { _ = db.Close() })
	return db
}

// Stop stops the server (SIGTERM, waits for its exit).
func (in *Instance) Stop() { in.t.Helper(); in.run("stop") }

// Restart starts the server again on its port, with its data.
func (in *Instance) Restart() { in.t.Helper(); in.run("restart") }

// SQL runs statements as root over the instance's socket and returns the output (tab-separated, with a
// header line).
func (in *Instance) SQL(statements string) string { in.t.Helper(); return in.run("sql", statements) }

func (in *Instance) run(args ...string) string {
	in.t.Helper()
	out, err := in.try(args...)
	if err != nil {
		in.t.Fatalf("mariadb-instance.sh %s %s: %v\n%s", args[0], in.name, err, out)
	}
	return out
}

func (in *Instance) try(args ...string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "deploy", "local", "mariadb-instance.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, script, append([]string{args[0], in.name}, args[1:]...)...).CombinedOutput()
	return string(out), err
}
