package testenv

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// CommitProxy is a TCP proxy in front of the test MariaDB (the address of RMQGUARD_TEST_MYSQL_DSN) that
// can hold back the server's answer to a COMMIT (or another statement): the server has committed, and the
// client learns it later, or never. It watches the client's packets for a COM_QUERY that starts with the
// statement (go-sql-driver sends "COMMIT" for Tx.Commit, and with interpolateParams every statement as a
// COM_QUERY) and treats the next data the server sends on that connection, its answer, as configured.
// Everything else passes unchanged. Build it with NewCommitProxy; it stops when the test ends.
type CommitProxy struct {
	ln      net.Listener
	target  string
	dsn     string
	ctx     context.Context
	cancel  context.CancelFunc
	rule    atomic.Pointer[answerRule]
	commits atomic.Int64 // COMMITs forwarded
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	stmts   []string // COM_QUERY statements forwarded, when recording
	record  bool
}

// answerRule is what the proxy does with the answer to a statement that starts with query: hold it delay,
// then drop it and close the client's connection when lose; with drop, the statement itself is not
// forwarded and both connections are closed.
type answerRule struct {
	query []byte // upper case
	delay time.Duration
	lose  bool
	drop  bool
	once  bool // the rule is cleared after its first match
}

// NewCommitProxy starts a proxy to the test database on a free port of 127.0.0.1; answers pass unchanged
// until DelayCommitAnswers, DelayAnswers or LoseCommitAnswers. The test fails when the DSN cannot be parsed
// or no port is free.
func NewCommitProxy(t testing.TB) *CommitProxy {
	t.Helper()
	cfg, err := mysql.ParseDSN(MySQLDSN())
	if err != nil {
		t.Fatalf("commit proxy: parse RMQGUARD_TEST_MYSQL_DSN: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("commit proxy: listen: %v", err)
	}
	target := cfg.Addr
	cfg.Addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	p := &CommitProxy{ln: ln, target: target, dsn: cfg.FormatDSN(), ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// DSN is RMQGUARD_TEST_MYSQL_DSN with the proxy's address (for dedup.WithTxDSN).
func (p *CommitProxy) DSN() string { return p.dsn }

// DelayCommitAnswers makes the server's answer to each later COMMIT reach the client d late (0: at once).
func (p *CommitProxy) DelayCommitAnswers(d time.Duration) { p.DelayAnswers("COMMIT", d) }

// DelayAnswers makes the server's answer to each later statement that starts with query (case-insensitive)
// reach the client d late; it replaces the previous setting.
func (p *CommitProxy) DelayAnswers(query string, d time.Duration) {
	p.rule.Store(&answerRule{query: bytes.ToUpper([]byte(query)), delay: d})
}

// LoseCommitAnswers makes the proxy wait for the server's answer to each later COMMIT (so the server has
// committed), hold it d, then close the client's connection without it: the client cannot know whether
// its transaction committed.
func (p *CommitProxy) LoseCommitAnswers(d time.Duration) {
	p.rule.Store(&answerRule{query: []byte("COMMIT"), delay: d, lose: true})
}

// DropCommits makes the proxy close the client's and the server's connections instead of forwarding each
// later COMMIT: the server never receives it and rolls the transaction back, and the client cannot know
// whether it committed.
func (p *CommitProxy) DropCommits() {
	p.rule.Store(&answerRule{query: []byte("COMMIT"), drop: true})
}

// DropNext makes the proxy close the client's and the server's connections instead of forwarding the next
// statement that starts with query (case-insensitive), once; later statements pass unchanged. The server
// rolls the open transaction back, and the client sees a broken connection.
func (p *CommitProxy) DropNext(query string) {
	p.rule.Store(&answerRule{query: bytes.ToUpper([]byte(query)), drop: true, once: true})
}

// RecordStatements starts recording the statements (COM_QUERY) forwarded from now on, dropping those
// recorded before; Statements returns them.
func (p *CommitProxy) RecordStatements() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stmts, p.record = nil, true
}

// Statements returns the statements recorded since RecordStatements, in the order forwarded (upper case,
// trimmed; with interpolateParams, as dedup.WithTxDSN's pool sends them, every statement is one).
func (p *CommitProxy) Statements() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.stmts...)
}

// Commits returns the number of COMMITs the proxy forwarded to the server.
func (p *CommitProxy) Commits() int { return int(p.commits.Load()) }

// Close stops the proxy: it closes the listener and every connection, and waits for its goroutines.
func (p *CommitProxy) Close() {
	p.cancel()
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// accept serves each client connection until the listener is closed.
func (p *CommitProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		var d net.Dialer
		server, err := d.DialContext(p.ctx, "tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		pending := make(chan *answerRule, 1) // the rule of a statement forwarded whose answer is not read yet
		p.wg.Add(2)
		go p.fromClient(client, server, pending)
		go p.fromServer(server, client, pending)
	}
}

// track registers the pair for Close; false (both closed) when the proxy is closing.
func (p *CommitProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// closePair closes both connections of a pair.
func (p *CommitProxy) closePair(a, b net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range []net.Conn{a, b} {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// comQuery is the command byte of a COM_QUERY packet.
const comQuery = 0x03

// fromClient forwards the client's packets (3-byte length, sequence number, payload) to the server; a
// statement that matches the rule is made pending before it is forwarded, so that its answer cannot pass
// unseen (the client sends nothing more before that answer).
func (p *CommitProxy) fromClient(client, server net.Conn, pending chan<- *answerRule) {
	defer p.wg.Done()
	defer p.closePair(client, server)
	r := bufio.NewReader(client)
	var header [4]byte
	for {
		if _, err := io.ReadFull(r, header[:]); err != nil {
			return
		}
		size := int(header[0]) | int(header[1])<<8 | int(header[2])<<16
		packet := make([]byte, 4+size)
		copy(packet, header[:])
		if _, err := io.ReadFull(r, packet[4:]); err != nil {
			return
		}
		if payload := packet[4:]; len(payload) > 0 && payload[0] == comQuery {
			stmt := bytes.ToUpper(bytes.TrimSpace(payload[1:]))
			r := p.rule.Load()
			matched := r != nil && bytes.HasPrefix(stmt, r.query)
			if matched && r.once {
				matched = p.rule.CompareAndSwap(r, nil)
			}
			if matched && r.drop {
				return // closes both connections: the server rolls the transaction back
			}
			if bytes.Equal(stmt, []byte("COMMIT")) {
				p.commits.Add(1)
			}
			p.mu.Lock()
			if p.record {
				p.stmts = append(p.stmts, string(stmt))
			}
			p.mu.Unlock()
			if matched {
				select {
				case pending <- r:
				default: // a previous answer still pending: cannot happen, the client waits for each answer
				}
			}
		}
		if _, err := server.Write(packet); err != nil {
			return
		}
	}
}

// fromServer forwards the server's data to the client, holding (or dropping) the answer to a pending
// statement: the first data the server sends after it.
func (p *CommitProxy) fromServer(server, client net.Conn, pending <-chan *answerRule) {
	defer p.wg.Done()
	defer p.closePair(client, server)
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			select {
			case r := <-pending:
				select {
				case <-time.After(r.delay):
				case <-p.ctx.Done():
					return
				}
				if r.lose {
					return // the server answered (a COMMIT: it committed); the client never hears it
				}
			default:
			}
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
