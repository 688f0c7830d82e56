package dedup

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pipeConn returns a trackedConn whose network connection is one end of a pipe (nothing ever arrives on it).
func pipeConn(t *testing.T) *trackedConn {
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return &trackedConn{net: &interruptibleConn{Conn: a}}
}

// F7: a statement whose context can end runs in the driver under a context that cannot (no watcher goroutine
// per statement); when its context ends, the read it is blocked in fails at once and the connection stays
// broken, whatever deadline the driver sets afterwards.
func TestTxPool_StatementContextEndingInterruptsTheConnection(t *testing.T) {
	c := pipeConn(t)
	ctx, cancel := context.WithCancel(context.Background())
	run, finish := c.uncancelled(ctx)
	require.Nil(t, run.Done(), "the driver gets a context it need not watch")

	read := make(chan error, 1)
	go func() { _, err := c.net.Read(make([]byte, 1)); read <- err }()
	cancel()
	select {
	case err := <-read:
		require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "the blocked read fails at once: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the read blocked past its context's end")
	}
	require.ErrorIs(t, finish(), context.Canceled, "the statement reports its context's error")
	require.True(t, c.net.broken())
	require.False(t, c.IsValid(), "the pool discards the connection")

	require.NoError(t, c.net.SetReadDeadline(time.Now().Add(time.Hour)))
	_, err := c.net.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "a later deadline of the driver does not revive it")
}

// A statement that ends before its context leaves the connection whole.
func TestTxPool_StatementEndingFirstLeavesTheConnectionWhole(t *testing.T) {
	c := pipeConn(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, finish := c.uncancelled(ctx)
	require.NoError(t, finish())
	cancel()
	require.False(t, c.net.broken())
}

// A context that cannot end, or has ended, or a connection the pool did not dial goes to the driver as is.
func TestTxPool_UncancellableOrEndedContextGoesToTheDriverAsIs(t *testing.T) {
	c := pipeConn(t)
	bg := context.Background()
	run, _ := c.uncancelled(bg)
	require.Equal(t, bg, run)
	ended, cancel := context.WithCancel(bg)
	cancel()
	run, finish := c.uncancelled(ended)
	require.Equal(t, ended, run, "the driver answers an ended context without touching the connection")
	require.NoError(t, finish())
	live, stop := context.WithCancel(bg)
	defer stop()
	undialled := &trackedConn{}
	run, _ = undialled.uncancelled(live)
	require.Equal(t, live, run)
	require.False(t, c.net.broken())
}

// The driver's check that the server has not closed an idle connection reaches the socket through the
// wrapper (go-sql-driver's connCheck asks for syscall.Conn).
func TestTxPool_DialledConnectionKeepsItsSocketForTheLivenessCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	nc, err := dialInterruptible(context.Background(), "tcp", ln.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	sc, ok := nc.(syscall.Conn)
	require.True(t, ok)
	_, err = sc.SyscallConn()
	require.NoError(t, err)
}
