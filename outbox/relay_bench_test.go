package outbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkRelay_PendingRowsOfDistinctKeys relays b.N committed rows of distinct sharding keys to a
// broker that answers SEND_OK at once: the relay's own cost per row (its statements, MariaDB's work,
// this process's CPU), without the broker's. It reports MariaDB's CPU per row when its pid file is found
// ($RMQGUARD_SERVICES_DIR/run/mariadb.pid).
func BenchmarkRelay_PendingRowsOfDistinctKeys(b *testing.B) {
	tb, o := newTable(b, Config{PollInterval: time.Hour})
	const chunk = 1000
	for from := 0; from < b.N; from += chunk {
		n := min(chunk, b.N-from)
		q := "INSERT INTO " + tb.t + ` (kind, event_id, source_event_id, scope, name, sharding_key, topic, tag, msg_keys,
		   properties, body, status, attempts, next_attempt_at, created_at) VALUES ` +
			strings.TrimSuffix(strings.Repeat("('message', ?, 'ev', 'scope', 'noted', ?, 'T', 'OrderNoted', '', NULL, ?, 'pending', 0, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)),", n), ",")
		args := make([]any, 0, 3*n)
		for i := from; i < from+n; i++ {
			args = append(args, "scope/ev-"+strconv.Itoa(i)+"/noted", "O-"+strconv.Itoa(i), []byte(`{"eventType":"OrderNoted","orderNo":"O-`+strconv.Itoa(i)+`"}`))
		}
		_, err := tb.db.Exec(q, args...)
		require.NoError(b, err)
	}
	s := &fakeSender{}
	dbBefore, dbOK := mariadbCPU()
	selfBefore, _ := procCPU("self")
	b.ResetTimer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.run(ctx, s, fixedRoute(4)) }()
	o.wakeRelay()
	for {
		var pending int
		require.NoError(b, tb.db.Get(&pending, "SELECT COUNT(*) FROM "+tb.t+" WHERE status = 'pending'"))
		if pending == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	cancel()
	require.NoError(b, <-done)
	selfAfter, _ := procCPU("self")
	b.ReportMetric(float64((selfAfter-selfBefore).Microseconds())/float64(b.N), "self-cpu-us/row")
	if dbAfter, ok := mariadbCPU(); ok && dbOK {
		b.ReportMetric(float64((dbAfter-dbBefore).Microseconds())/float64(b.N), "mariadb-cpu-us/row")
	}
	s.mu.Lock()
	b.ReportMetric(float64(len(s.calls))/float64(b.N), "sends/row")
	s.mu.Unlock()
}

// mariadbCPU is the CPU time of the MariaDB that `make up` started, when its pid file is found.
func mariadbCPU() (time.Duration, bool) {
	dir := os.Getenv("RMQGUARD_SERVICES_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".local", "state", "rmqguard")
	}
	pid, err := os.ReadFile(filepath.Join(dir, "run", "mariadb.pid"))
	if err != nil {
		return 0, false
	}
	d, err := procCPU(strings.TrimSpace(string(pid)))
	return d, err == nil
}

// procCPU is utime + stime of process pid ("self" for this one), from /proc/<pid>/stat.
func procCPU(pid string) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat of %s", pid)
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond, nil
}
