package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/scrape"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// consumerProcess is cmd/example-consumer running as a process of its own, so it can be killed with -9.
type consumerProcess struct {
	cmd     *exec.Cmd
	metrics string // http://addr/metrics
}

// buildExample builds cmd/example-consumer once per test into a temporary folder.
func buildExample(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "example-consumer")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/rmqguard/rmqguard/cmd/example-consumer").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// freeAddr returns a 127.0.0.1 address with a port nobody listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// startExample runs the example consumer on the world's group and topic against the test database and
// waits until /healthz answers.
func (w *world) startExample(bin string) *consumerProcess {
	w.t.Helper()
	addr := freeAddr(w.t)
	cmd := exec.Command(bin, "run", "--namesrv", w.ns[0], "--broker", testenv.Broker(w.t),
		"--mysql-dsn", testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN),
		"--group", w.group, "--topic", w.topic, "--metrics-addr", addr, "--goroutines", "8")
	logFile, err := os.Create(filepath.Join(w.t.TempDir(), "consumer.log"))
	require.NoError(w.t, err)
	w.t.Cleanup(func() { _ = logFile.Close() })
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(w.t, cmd.Start())
	p := &consumerProcess{cmd: cmd, metrics: "http://" + addr + "/metrics"}
	w.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(w.t, func() bool {
		resp, err := httpGet(w.ctx, "http://"+addr+"/healthz")
		return err == nil && resp == 200
	}, 60*time.Second, 100*time.Millisecond, "the example consumer answers /healthz (log: %s)", logFile.Name())
	return p
}

// counter reads rmqguard_messages_total{outcome} of the process's group and topic.
func (p *consumerProcess) counter(ctx context.Context, group, topic, outcome string) (float64, error) {
	return scrape.Counter(ctx, p.metrics, "rmqguard_messages_total",
		map[string]string{"group": group, "topic": topic, "outcome": outcome})
}

// TestE2E_S3_F8_KillMinus9AfterCommitsRedeliveryIsDuplicate runs the example consumer as a process, sends
// 1000 events, kills it with SIGKILL once about half have committed (their offsets are persisted only every
// 5 s, so many committed messages have no committed offset), and restarts it. Every event ends with
// exactly one effect and one dedup row; the restarted process sees the redelivered-but-committed messages
// as duplicates, and processes exactly the events that had not committed.
func TestE2E_S3_F8_KillMinus9AfterCommitsRedeliveryIsDuplicate(t *testing.T) {
	w := newWorld(t, 4)
	db := shoptest.MySQL(t)
	bin := buildExample(t)
	const n = 1000
	prefix := w.run + "-o"

	first := w.startExample(bin)
	plan, err := shop.Workload{RunID: w.run, Topic: w.topic, Messages: n}.Plan()
	require.NoError(t, err)
	w.send(plan.Messages...)
	require.Eventually(t, func() bool {
		orders, _, err := shop.Effects(w.ctx, db, prefix)
		return err == nil && orders >= n/2
	}, 60*time.Second, 5*time.Millisecond, "about half the events commit")
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	_ = first.cmd.Wait()
	// A COMMIT the server received before the kill still completes; count once the killed process's
	// sessions have nothing left running.
	require.Eventually(t, func() bool {
		var busy int
		err := db.GetContext(w.ctx, &busy, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE ID <> CONNECTION_ID() AND DB = DATABASE() AND COMMAND <> 'Sleep'`)
		return err == nil && busy == 0
	}, 10*time.Second, 20*time.Millisecond, "the killed consumer's statements finished on the server")
	committedBeforeKill, _, err := shop.Effects(w.ctx, db, prefix)
	require.NoError(t, err)
	require.Less(t, committedBeforeKill, n, "killed before the end")

	second := w.startExample(bin)
	require.Eventually(t, func() bool {
		orders, _, err := shop.Effects(w.ctx, db, prefix)
		return err == nil && orders >= n
	}, 90*time.Second, 100*time.Millisecond, "every event takes effect after the restart")
	// Wait until the restarted process has answered every redelivery it got: processed counts the events
	// that had not committed; duplicates are the redelivered-but-committed ones.
	var processed, duplicates float64
	var scrapeErr error
	require.Eventually(t, func() bool {
		var errP, errD error
		processed, errP = second.counter(w.ctx, w.group, w.topic, "processed")
		duplicates, errD = second.counter(w.ctx, w.group, w.topic, "duplicate")
		scrapeErr = errors.Join(errP, errD)
		return scrapeErr == nil && processed == float64(n-committedBeforeKill)
	}, 30*time.Second, 100*time.Millisecond, "processed %.0f, want %d (scrape: %v)", processed, n-committedBeforeKill, scrapeErr)

	orders, reservations, err := shop.Effects(w.ctx, db, prefix)
	require.NoError(t, err)
	assert.Equal(t, n, orders, "1000 effects")
	assert.Equal(t, n, reservations)
	var rows int
	require.NoError(t, db.GetContext(w.ctx, &rows, `SELECT COUNT(*) FROM processed_event WHERE consumer_group = ?`, w.group))
	assert.Equal(t, n, rows, "1000 dedup rows")
	assert.Positive(t, duplicates, "committed messages whose offset was not persisted came back as duplicates")
	t.Logf("committed before kill -9: %d; after restart: %.0f processed, %.0f duplicates (redelivered but committed)",
		committedBeforeKill, processed, duplicates)
	assert.Equal(t, float64(n-committedBeforeKill), processed, "the restarted process applied only what had not committed")
}
