package dedup

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// baseConn is what the go-sql-driver connection implements and a trackedConn forwards.
type baseConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

// txConnector opens the connections of a store's own transaction pool (WithTxDSN). Each connection starts
// with autocommit off, set once when it is opened (the DSN parameter autocommit=0, which go-sql-driver
// sends as one SET at connect) instead of twice per message, with interpolateParams on (each statement is
// one round trip, not a prepare, an execute and a close), and is a trackedConn.
type txConnector struct{ base driver.Connector }

// newTxConnector parses dsn (go-sql-driver's format) and returns its connector with autocommit off.
func newTxConnector(dsn string) (*txConnector, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("dedup: WithTxDSN: dsn: %w", err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	for k := range cfg.Params { // MySQL's variable names ignore case: AUTOCOMMIT=1 would race with ours
		if strings.EqualFold(k, "autocommit") {
			delete(cfg.Params, k)
		}
	}
	cfg.Params["autocommit"] = "0"
	// Several statements in one query would let "DO 0; ROLLBACK" pass as plain DML (see plainDML): such
	// a query fails on this pool (MySQL 1064) instead.
	cfg.MultiStatements = false
	// Arguments interpolated by the driver: one round trip per statement instead of a prepare, an execute
	// and a close; the driver escapes them itself and falls back to a prepared statement when it cannot.
	cfg.InterpolateParams = true
	if cfg.DialFunc == nil && standardNet(cfg.Net) { // a network registered with the driver keeps its dial
		cfg.DialFunc = dialInterruptible
	}
	base, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("dedup: WithTxDSN: connector: %w", err)
	}
	return &txConnector{base: base}, nil
}

// Connect opens a connection; it fails when the driver's connection lacks an interface trackedConn forwards.
func (c *txConnector) Connect(ctx context.Context) (driver.Conn, error) {
	var nc *interruptibleConn
	conn, err := c.base.Connect(context.WithValue(ctx, dialSlot{}, &nc))
	if err != nil {
		return nil, err
	}
	b, ok := conn.(baseConn)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("dedup: driver connection %T lacks an interface the transaction pool needs", conn)
	}
	return &trackedConn{base: b, net: nc}, nil
}

// standardNet reports whether network is one the driver dials itself (tcp, tcp4, tcp6, unix).
func standardNet(network string) bool {
	switch network {
	case "tcp", "tcp4", "tcp6", "unix":
		return true
	}
	return false
}

// Driver returns the underlying driver.
func (c *txConnector) Driver() driver.Driver { return c.base.Driver() }

// trackedConn is a connection that remembers whether, since its last BEGIN, anything happened that may
// have ended the transaction without the store knowing (a doubt). Two things can: a failed statement (MySQL
// rolls the whole transaction back on a deadlock, 1213; on a lock-wait timeout, 1205, with
// innodb_rollback_on_timeout; a lost connection ends it), and a statement that ends or commits it without
// failing (ROLLBACK, COMMIT, DDL, SET autocommit, …). After either, statements run in a new implicit
// transaction without the dedup row. Confirm reads the row back only after a doubt and skips the
// SELECT otherwise. Every failure counts but MySQL 1062 (a statement-level rollback only), so that no error that rolls back is missed
// (driver.ErrSkip, "use a prepared statement instead", is not a failure); every statement that is not
// plain DML (see plainDML) counts.
type trackedConn struct {
	base  baseConn
	doubt atomic.Bool
	// session: a statement that is not plain DML ran since the last BEGIN; it may have changed the
	// session (SET autocommit = 1 above all), so release turns autocommit off again before pooling.
	session atomic.Bool
	// txCtx is the context given to BeginTx until that transaction's Commit or Rollback (database/sql
	// serialises the calls on a connection); see stmtContext.
	txCtx context.Context
	// net is the connection's network connection when the pool dialled it (txinterrupt.go); nil otherwise.
	net *interruptibleConn
}

// stmtContext is the context a statement runs under: ctx, or, when ctx can never end (a handler's tx.Exec
// without its context passes context.Background()) inside a transaction, the context given to BeginTx. The
// driver cancels a statement (it closes the connection) when its context ends, so a handler blocked in a
// lock wait no longer holds the connection past the message's deadline (F7): the transaction is rolled back
// and the connection handed back then, not when innodb_lock_wait_timeout ends the wait.
func (c *trackedConn) stmtContext(ctx context.Context) context.Context {
	if ctx.Done() == nil && c.txCtx != nil {
		return c.txCtx
	}
	return ctx
}

// trackedTx is a transaction of a trackedConn; finishing it ends its statements' fallback context.
type trackedTx struct {
	base driver.Tx
	conn *trackedConn
}

func (t *trackedTx) Commit() error {
	t.conn.txCtx = nil
	return t.base.Commit()
}

func (t *trackedTx) Rollback() error {
	t.conn.txCtx = nil
	return t.base.Rollback()
}

// note records err (nil and driver.ErrSkip excepted) as a doubt and returns it unchanged. MySQL 1062
// (duplicate key) is not a doubt: InnoDB rolls back only the failing statement, never the transaction, so
// a duplicate claim inside a batch transaction costs no SELECT before its COMMIT.
func (c *trackedConn) note(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errDupEntry {
		return err
	}
	if err != nil && !errors.Is(err, driver.ErrSkip) {
		c.doubt.Store(true)
	}
	return err
}

// errDupEntry is MySQL's ER_DUP_ENTRY, a statement-level rollback only.
const errDupEntry = 1062

// statement records query as a doubt unless it is plain DML.
func (c *trackedConn) statement(query string) {
	if !plainDML(query) {
		c.doubt.Store(true)
		c.session.Store(true)
	}
}

// sessionTouchedSinceBegin reports whether a statement that is not plain DML ran since the last BEGIN.
func (c *trackedConn) sessionTouchedSinceBegin() bool { return c.session.Load() }

// doubtSinceBegin reports whether a statement failed, or one that is not plain DML ran, since the last BEGIN.
func (c *trackedConn) doubtSinceBegin() bool { return c.doubt.Load() }

// plainDML reports whether query starts (after blanks and opening parentheses) with a keyword of a
// statement that can neither end nor commit the transaction without failing: SELECT, INSERT, UPDATE,
// DELETE, REPLACE, WITH, VALUES, TABLE, DO, SAVEPOINT. Triggers and stored functions such statements run
// cannot commit or roll back either (MySQL refuses it with an error). Anything else (a leading comment
// included) is not known to be plain: the store then pays one SELECT rather than guess.
func plainDML(query string) bool {
	i := 0
	for i < len(query) && (query[i] == ' ' || query[i] == '\t' || query[i] == '\n' || query[i] == '\r' || query[i] == '(') {
		i++
	}
	j := i
	for j < len(query) && (query[j]|0x20 >= 'a' && query[j]|0x20 <= 'z') {
		j++
	}
	switch strings.ToUpper(query[i:j]) {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "WITH", "VALUES", "TABLE", "DO", "SAVEPOINT":
		return true
	}
	return false
}

// clearDoubt forgets a doubt that only localTx.RollbackTo's own statement raised: a ROLLBACK TO SAVEPOINT that
// succeeds keeps the transaction open (had the server ended it, the savepoint would be gone: 1305, a
// failure that stays a doubt). A handler's own ROLLBACK TO stays a doubt: it may undo another member's
// claim of the batch.
func (c *trackedConn) clearDoubt() { c.doubt.Store(false) }

func (c *trackedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *trackedConn) Close() error { return c.base.Close() }

func (c *trackedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *trackedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.doubt.Store(false)
	c.session.Store(false)
	run, finish := c.uncancelled(ctx)
	tx, err := c.base.BeginTx(run, opts)
	if ierr := finish(); ierr != nil {
		if err == nil {
			_ = tx.Rollback() // fails on the interrupted connection, which the pool discards
		}
		return nil, c.note(ierr)
	}
	if err != nil {
		return nil, c.note(err)
	}
	c.txCtx = ctx
	return &trackedTx{base: tx, conn: c}, nil
}

func (c *trackedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.base.PrepareContext(c.stmtContext(ctx), query)
	if err != nil {
		return nil, c.note(err)
	}
	return &trackedStmt{base: st, conn: c, query: query}, nil
}

func (c *trackedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.statement(query)
	run, finish := c.uncancelled(c.stmtContext(ctx))
	r, err := c.base.ExecContext(run, query, args)
	if ierr := finish(); ierr != nil {
		return nil, c.note(ierr)
	}
	return r, c.note(err)
}

func (c *trackedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.statement(query)
	r, err := c.base.QueryContext(c.stmtContext(ctx), query, args)
	if err != nil {
		return nil, c.note(err)
	}
	return wrapRows(r, c), nil
}

func (c *trackedConn) Ping(ctx context.Context) error              { return c.base.Ping(ctx) }
func (c *trackedConn) CheckNamedValue(nv *driver.NamedValue) error { return c.base.CheckNamedValue(nv) }

// ResetSession refuses an interrupted connection (driver.ErrBadConn: the pool discards it).
func (c *trackedConn) ResetSession(ctx context.Context) error {
	if c.net.broken() {
		return driver.ErrBadConn
	}
	return c.base.ResetSession(ctx)
}

// IsValid is false for an interrupted connection, even when its statement had ended before the interruption.
func (c *trackedConn) IsValid() bool { return !c.net.broken() && c.base.IsValid() }

// trackedStmt is a prepared statement of a trackedConn; its runs and failures count as the connection's.
type trackedStmt struct {
	base  driver.Stmt
	conn  *trackedConn
	query string
}

func (s *trackedStmt) Close() error  { return s.base.Close() }
func (s *trackedStmt) NumInput() int { return s.base.NumInput() }

// Exec is driver.Stmt's context-free form; database/sql calls ExecContext.
func (s *trackedStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.conn.statement(s.query)
	r, err := s.base.Exec(args)
	return r, s.conn.note(err)
}

// Query is driver.Stmt's context-free form; database/sql calls QueryContext.
func (s *trackedStmt) Query(args []driver.Value) (driver.Rows, error) {
	s.conn.statement(s.query)
	r, err := s.base.Query(args)
	if err != nil {
		return nil, s.conn.note(err)
	}
	return wrapRows(r, s.conn), nil
}

func (s *trackedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.conn.statement(s.query)
	ex, ok := s.base.(driver.StmtExecContext)
	if !ok {
		return nil, s.conn.note(fmt.Errorf("dedup: statement %T lacks ExecContext", s.base))
	}
	r, err := ex.ExecContext(s.conn.stmtContext(ctx), args)
	return r, s.conn.note(err)
}

func (s *trackedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.conn.statement(s.query)
	q, ok := s.base.(driver.StmtQueryContext)
	if !ok {
		return nil, s.conn.note(fmt.Errorf("dedup: statement %T lacks QueryContext", s.base))
	}
	r, err := q.QueryContext(s.conn.stmtContext(ctx), args)
	if err != nil {
		return nil, s.conn.note(err)
	}
	return wrapRows(r, s.conn), nil
}

// CheckNamedValue forwards to the statement's checker, else the connection's (as database/sql would).
func (s *trackedStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := s.base.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return s.conn.CheckNamedValue(nv)
}

// fullRows is what go-sql-driver's result sets implement and trackedRows forwards.
type fullRows interface {
	driver.Rows
	driver.RowsNextResultSet
	driver.RowsColumnTypeDatabaseTypeName
	driver.RowsColumnTypeNullable
	driver.RowsColumnTypePrecisionScale
	driver.RowsColumnTypeScanType
}

// trackedRows is a result set whose failures while reading or closing it (which reads the rest) count as the
// connection's: InnoDB sends rows as it locks them, so a deadlock can end a SELECT … FOR UPDATE after its
// first rows.
type trackedRows struct {
	fullRows
	conn *trackedConn
}

// wrapRows wraps r in a trackedRows, or a plainRows when r lacks the optional interfaces.
func wrapRows(r driver.Rows, c *trackedConn) driver.Rows {
	if f, ok := r.(fullRows); ok {
		return &trackedRows{fullRows: f, conn: c}
	}
	return &plainRows{Rows: r, conn: c}
}

func (r *trackedRows) Next(dest []driver.Value) error { return noteRows(r.conn, r.fullRows.Next(dest)) }
func (r *trackedRows) Close() error                   { return r.conn.note(r.fullRows.Close()) }
func (r *trackedRows) NextResultSet() error           { return noteRows(r.conn, r.fullRows.NextResultSet()) }

// plainRows is trackedRows for a result set with only the required methods.
type plainRows struct {
	driver.Rows
	conn *trackedConn
}

func (r *plainRows) Next(dest []driver.Value) error { return noteRows(r.conn, r.Rows.Next(dest)) }
func (r *plainRows) Close() error                   { return r.conn.note(r.Rows.Close()) }

// noteRows records err on c unless it is io.EOF (the end of the rows).
func noteRows(c *trackedConn, err error) error {
	if errors.Is(err, io.EOF) {
		return err
	}
	return c.note(err)
}
