package dedup

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// A statement on the transaction pool (WithTxDSN) whose context can end is run by the driver under a context
// that cannot, and interrupted by the connection itself when its context ends: go-sql-driver watches a
// cancellable context through a goroutine of the connection, two goroutine hand-offs per statement, which
// on a busy machine cost more than the statement's own round trip. The interruption has the driver's
// effect: the statement fails with the context's error and the connection is discarded (MySQL rolls the
// transaction back), so a handler blocked in a lock wait still gives its connection back at its deadline.

// interruptibleConn is a pool connection's network connection, which interrupt breaks for good: every read
// and write in flight or to come fails at once, whatever deadline the driver sets afterwards.
type interruptibleConn struct {
	net.Conn
	mu          sync.Mutex
	interrupted bool
}

// longAgo is the deadline that makes every read and write of a connection fail at once.
var longAgo = time.Unix(1, 0)

// interrupt makes the connection's reads and writes fail from now on.
func (c *interruptibleConn) interrupt() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.interrupted = true
	_ = c.Conn.SetDeadline(longAgo)
}

// broken reports whether c was interrupted; false for a nil c.
func (c *interruptibleConn) broken() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.interrupted
}

// deadline returns t, or longAgo once the connection is interrupted; called with c.mu held.
func (c *interruptibleConn) deadline(t time.Time) time.Time {
	if c.interrupted {
		return longAgo
	}
	return t
}

func (c *interruptibleConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetDeadline(c.deadline(t))
}

func (c *interruptibleConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetReadDeadline(c.deadline(t))
}

func (c *interruptibleConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Conn.SetWriteDeadline(c.deadline(t))
}

// SyscallConn gives the driver the socket of a TCP or Unix connection, with which it checks, before reusing an
// idle connection, that the server has not closed it (go-sql-driver's checkConnLiveness).
func (c *interruptibleConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errNoSyscallConn
	}
	return sc.SyscallConn()
}

// errNoSyscallConn is SyscallConn's error for a connection without a socket of its own.
var errNoSyscallConn = errors.New("dedup: transaction pool connection has no socket")

// dialSlot is the context key under which txConnector.Connect receives the connection its dial opened.
type dialSlot struct{}

// dialInterruptible dials network addr as the driver does and returns an interruptibleConn, also put in the
// slot ctx carries (txConnector.Connect's).
func dialInterruptible(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer // TCP keep-alives on, as the driver sets them on its own connections
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	ic := &interruptibleConn{Conn: nc}
	if slot, ok := ctx.Value(dialSlot{}).(**interruptibleConn); ok {
		*slot = ic
	}
	return ic, nil
}

// noInterruption is the finish function of a statement the driver watches itself.
func noInterruption() error { return nil }

// uncancelled returns the context the driver runs a statement of ctx under, and the function to call once
// the driver returned: nil, or ctx's error when ctx ended during the statement (the connection is then
// interrupted, and the statement's result is not to be trusted). Without an interruptible connection, or
// when ctx cannot end or has ended, the driver watches ctx itself.
func (c *trackedConn) uncancelled(ctx context.Context) (context.Context, func() error) {
	if c.net == nil || ctx.Done() == nil || ctx.Err() != nil {
		return ctx, noInterruption
	}
	stop := context.AfterFunc(ctx, c.net.interrupt)
	return context.WithoutCancel(ctx), func() error {
		if stop() {
			return nil
		}
		return ctx.Err()
	}
}
