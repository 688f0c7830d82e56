package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/internal/letter"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/topics"
)

// The README's minimal consumer (examples/minimal), run as a user runs it — its own process, its own
// database holding only an orders table, the environment of deploy/local/env.sh — applies each event once:
// an event sent again and again until its effect shows is one row, so is an order sent again under another
// event ID; a body that is not JSON is a letter in %DLQ%inventory with its reason; SIGTERM stops it cleanly
// (exit 0).
func TestE2E_READMEMinimalConsumerAppliesEachEventOnce(t *testing.T) {
	ns := testenv.NameServer(t)
	broker := testenv.Broker(t)
	shoptest.MySQL(t)         // the server is up (or the test fails under RMQGUARD_REQUIRE_SERVICES)
	rlog.SetLogLevel("error") // the test's own producer and DLQ reader
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, group = "ORDER", "inventory" // examples/minimal's own
	require.NoError(t, rmq.EnsureTopic(ctx, []string{ns}, broker, topic, 4))

	dsn, db := scratchDatabase(t, "rmqguard_scratch_minimal_"+strings.ReplaceAll(testenv.Unique("m"), "-", "_"))
	_, err := db.Exec("CREATE TABLE orders (order_no VARCHAR(64) PRIMARY KEY, quantity INT NOT NULL)")
	require.NoError(t, err)

	bin := filepath.Join(t.TempDir(), "minimal")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/rmqguard/rmqguard/examples/minimal").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	var logs bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "RMQGUARD_MYSQL_DSN="+dsn, "RMQGUARD_NAMESRV="+ns)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	prod, err := rmq.StartProducer([]string{ns}, "rmqguard-e2e-minimal-producer")
	require.NoError(t, err)
	defer func() { _ = prod.Shutdown() }()
	run := testenv.Unique("min")
	orderCreated := func(eventID, body string) *primitive.Message {
		msg := primitive.NewMessage(topic, []byte(body))
		msg.WithTag("OrderCreated")
		msg.WithProperty("EVENT_ID", eventID)
		return msg
	}

	// Until the consumer has its queues, a message sent may be before its first offset: send each event
	// again until its row shows (every copy after the first is a duplicate the dedup row absorbs). The
	// topic and group are the README's, shared with anyone who ran it: messages sent to ORDER while no
	// consumer of the group ran (a user following the README, an earlier run's last copies) are applied
	// here too, so only this run's rows are counted.
	orders := []string{run + "-o1", run + "-o2", run + "-o3"}
	require.Eventually(t, func() bool {
		for i, order := range orders {
			_, err := prod.SendSync(ctx, orderCreated(run+"-e"+string(rune('1'+i)),
				`{"orderNo":"`+order+`","quantity":2,"addedByANewerProducer":"ignored"}`))
			require.NoError(t, err)
		}
		var n int
		require.NoError(t, db.Get(&n, "SELECT COUNT(*) FROM orders WHERE order_no LIKE ?", run+"-%"))
		return n == len(orders)
	}, 90*time.Second, time.Second, "the minimal consumer applied the orders; its log:\n%s", &logs)
	// The same order under another event ID (a producer that lost its event ID): the business key makes it
	// the same order, processed, not retried.
	again := run + "-again"
	_, err = prod.SendSync(ctx, orderCreated(again, `{"orderNo":"`+orders[0]+`","quantity":2}`))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, db.Get(&n, "SELECT COUNT(*) FROM processed_event WHERE consumer_group = ? AND event_id = ?", group, again))
		return n == 1
	}, 60*time.Second, time.Second, "the re-created order's event is processed; log:\n%s", &logs)
	var rows []string
	require.NoError(t, db.Select(&rows, "SELECT order_no FROM orders WHERE order_no LIKE ? ORDER BY order_no", run+"-%"))
	assert.Equal(t, orders, rows, "one row per order, whatever the copies and event IDs")
	var claims int
	require.NoError(t, db.Get(&claims, "SELECT COUNT(*) FROM processed_event WHERE consumer_group = ? AND event_id LIKE ?", group, run+"-e%"))
	assert.Equal(t, len(orders), claims, "dedup.Open created processed_event; one row per event")

	poison := run + "-poison"
	_, err = prod.SendSync(ctx, orderCreated(poison, "not json"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		letters, err := dlqtool.Read(ctx, topics.Cluster{NameServers: []string{ns}}, group, 1000)
		require.NoError(t, err)
		for _, l := range letters {
			if l.GetProperty("EVENT_ID") == poison {
				assert.Contains(t, l.GetProperty(letter.PropReason), "undecodable body")
				return true
			}
		}
		return false
	}, 60*time.Second, time.Second, "the undecodable body is a letter in %%DLQ%%%s with its reason", group)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "a clean stop exits 0; log:\n%s", &logs)
	case <-time.After(60 * time.Second):
		t.Fatalf("the minimal consumer did not stop within 60 s of SIGTERM; log:\n%s", &logs)
	}
	// No WithLogger: the default logger wrote the dead letter's decision line to stderr.
	assert.Contains(t, logs.String(), `"event_id":"`+poison+`"`, "the consumer's own lines reach stderr by default")
}

// scratchDatabase creates database name on the test server (the test user may create rmqguard_scratch_%
// databases), drops it when the test ends, and returns its DSN and a pool on it.
func scratchDatabase(t *testing.T, name string) (string, *sqlx.DB) {
	t.Helper()
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN())
	require.NoError(t, err)
	admin, err := sql.Open("mysql", testenv.MySQLDSN())
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.Exec("CREATE DATABASE " + name)
	require.NoError(t, err)
	t.Cleanup(func() {
		if admin, err := sql.Open("mysql", testenv.MySQLDSN()); err == nil {
			_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name)
			_ = admin.Close()
		}
	})
	cfg.DBName = name
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return cfg.FormatDSN(), db
}
