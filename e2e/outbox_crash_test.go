package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/outbox"
)

// Environment of the relay child process (TestMain runs it instead of the tests when set).
const (
	envRelayChild   = "RMQGUARD_E2E_OUTBOX_RELAY_PREFIX" // the child's table prefix
	envRelayNameSrv = "RMQGUARD_E2E_OUTBOX_RELAY_NAMESRV"
)

func TestMain(m *testing.M) {
	if prefix := os.Getenv(envRelayChild); prefix != "" {
		os.Exit(relayChild(prefix, os.Getenv(envRelayNameSrv)))
	}
	os.Exit(m.Run())
}

// relayChild runs an outbox relay on the tables of prefix until it is killed (or SIGTERM).
func relayChild(prefix, nameServer string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	db, err := sqlx.Open("mysql", testenv.MySQLDSN())
	if err != nil {
		return 2
	}
	store, err := dedup.NewStore(db, dedup.WithTablePrefix(prefix))
	if err != nil {
		return 3
	}
	ob, err := outbox.New(store, outbox.Config{NameServers: []string{nameServer}, PollInterval: 100 * time.Millisecond})
	if err != nil {
		return 4
	}
	if err := ob.Run(ctx); err != nil {
		return 5
	}
	return 0
}

// blackhole accepts TCP connections and never answers: a name server that hangs every request.
func blackhole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// F30: a relay process killed with -9 while it holds claimed rows (its send hangs) loses nothing: the
// database releases its locks with its connection, and the relay of the next process sends every row;
// the downstream group applies each once, under its derived event ID.
func TestOutboxRelay_KilledWhileHoldingRowsTheNextRelaySendsThemOnce(t *testing.T) {
	f := newFixture(t)
	up := f.upstream(sendEach(f.outbox(outbox.Config{}), f.topic, keyOfEvent))
	ids := deliverEvents(t, up, f.run, 4, 5)

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), envRelayChild+"="+f.prefix, envRelayNameSrv+"="+blackhole(t))
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	// The child holds the head rows' locks while its send hangs: a SKIP LOCKED read here sees fewer rows.
	table := f.prefix + outboxsql.Table
	require.Eventually(t, func() bool {
		tx, err := f.db.Beginx()
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		var free []int64
		require.NoError(t, tx.Select(&free, "SELECT id FROM "+table+" WHERE status = 'pending' FOR UPDATE SKIP LOCKED"))
		return len(free) < len(ids)
	}, 30*time.Second, 20*time.Millisecond, "the child relay never claimed a row")
	require.NoError(t, child.Process.Signal(syscall.SIGKILL))
	_ = child.Wait()
	require.Equal(t, len(ids), f.count(outboxsql.StatusPending), "nothing was sent or lost by the killed relay")

	ds := f.downstream()
	f.relay(f.outbox(outbox.Config{}))
	requireOnceInKeyOrder(t, f, ds, ids)
}
