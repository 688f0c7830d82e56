package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Gate is a TCP forwarder between the consumers and the notification receiver, so that a fault can take
// the receiver away (connections refused) or make it slow without losing the counts the receiver keeps in
// memory. Its address is the one the consumers are given as --notify-addr.
type Gate struct {
	addr, target string

	mu    sync.Mutex
	l     net.Listener
	delay time.Duration
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// OpenGate listens on a free 127.0.0.1 port and forwards every connection to target (host:port).
func OpenGate(target string) (*Gate, error) {
	g := &Gate{target: target, conns: map[net.Conn]struct{}{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	g.addr = l.Addr().String()
	g.serve(l)
	return g, nil
}

// Addr is the gate's host:port.
func (g *Gate) Addr() string { return g.addr }

// Down closes the listener and every open connection: from now on connections to Addr are refused.
func (g *Gate) Down() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.l != nil {
		_ = g.l.Close()
		g.l = nil
	}
	for c := range g.conns {
		_ = c.Close()
	}
}

// Up listens on Addr again (retrying for up to 10 s while the port is not yet free).
func (g *Gate) Up(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := net.Listen("tcp", g.addr)
		if err == nil {
			g.serve(l)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gate: listen on %s again: %w", g.addr, err)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// SetDelay makes every chunk the consumers send (a request, on a new or a kept-alive connection) wait d
// before it is forwarded: a slow receiver. 0 forwards at once.
func (g *Gate) SetDelay(d time.Duration) {
	g.mu.Lock()
	g.delay = d
	g.mu.Unlock()
}

// Close takes the gate down for good and waits for its goroutines.
func (g *Gate) Close() {
	g.Down()
	g.wg.Wait()
}

func (g *Gate) serve(l net.Listener) {
	g.mu.Lock()
	g.l = l
	g.mu.Unlock()
	g.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed by Down
			}
			g.mu.Lock()
			if g.l != l { // taken down meanwhile
				g.mu.Unlock()
				_ = c.Close()
				continue
			}
			g.conns[c] = struct{}{}
			g.mu.Unlock()
			g.wg.Go(func() { g.forward(c) })
		}
	})
}

// forward copies c to a new connection to the target and back until either side closes.
func (g *Gate) forward(c net.Conn) {
	defer func() {
		g.mu.Lock()
		delete(g.conns, c)
		g.mu.Unlock()
		_ = c.Close()
	}()
	t, err := net.DialTimeout("tcp", g.target, 5*time.Second)
	if err != nil {
		return
	}
	defer t.Close()
	// Either direction ending (a side closed, or Down closed c) closes both, so no half-closed keep-alive
	// connection outlives the gate's Down.
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) { // answers
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go func() { // requests, each held by the current delay
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				g.mu.Lock()
				d := g.delay
				g.mu.Unlock()
				time.Sleep(d)
				if _, werr := t.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}()
	go pipe(c, t)
	<-done
	_ = c.Close()
	_ = t.Close()
	<-done
}
