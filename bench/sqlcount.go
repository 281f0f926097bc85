package bench

import (
	"context"
	"database/sql/driver"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/adal-relay/adal/storage"
)

// SQLCounter counts what a process sends to PostgreSQL through the connector it wraps (installed with
// storage.WrapPostgresConnector): statements (every Exec and Query, prepared or not) and transaction control
// (BEGIN, COMMIT, ROLLBACK), each one round trip. pg_stat_statements would need a server restart to load;
// this needs nothing from the server.
type SQLCounter struct {
	statements atomic.Int64
	txControl  atomic.Int64
	// Tally, when set, also counts statements by their text (first line, trimmed): a breakdown of what a
	// figure is made of.
	Tally bool
	mu    sync.Mutex
	bySQL map[string]int64
}

// Breakdown returns the per-statement counts since the last call (with Tally on), and forgets them.
func (c *SQLCounter) Breakdown() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.bySQL
	c.bySQL = nil
	return out
}

var digits = regexp.MustCompile(`\b[0-9]+\b`)

func (c *SQLCounter) statement(query string) {
	c.statements.Add(1)
	if !c.Tally {
		return
	}
	key := digits.ReplaceAllString(strings.Join(strings.Fields(query), " "), "N")
	if len(key) > 110 {
		key = key[:110]
	}
	c.mu.Lock()
	if c.bySQL == nil {
		c.bySQL = map[string]int64{}
	}
	c.bySQL[key]++
	c.mu.Unlock()
}

// SQLCount is a reading of a SQLCounter.
type SQLCount struct {
	Statements int64 // SELECT / INSERT / UPDATE / DELETE … (including pg_notify)
	TxControl  int64 // BEGIN, COMMIT, ROLLBACK
}

// Read returns the counts so far.
func (c *SQLCounter) Read() SQLCount {
	return SQLCount{Statements: c.statements.Load(), TxControl: c.txControl.Load()}
}

// Sub is the difference of two readings.
func (a SQLCount) Sub(b SQLCount) SQLCount {
	return SQLCount{Statements: a.Statements - b.Statements, TxControl: a.TxControl - b.TxControl}
}

// Wrap returns a connector whose connections count into c.
func (c *SQLCounter) Wrap(next driver.Connector) driver.Connector {
	return &countingConnector{next: next, c: c}
}

type countingConnector struct {
	next driver.Connector
	c    *SQLCounter
}

func (k *countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := k.next.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{ForwardingConn: storage.ForwardingConn{Conn: conn}, c: k.c}, nil
}

func (k *countingConnector) Driver() driver.Driver { return k.next.Driver() }

// countingConn forwards every optional interface lib/pq's connection implements, counting on the way.
type countingConn struct {
	storage.ForwardingConn
	c *SQLCounter
}

var (
	_ driver.Connector        = (*countingConnector)(nil)
	_ driver.ExecerContext    = (*countingConn)(nil)
	_ driver.QueryerContext   = (*countingConn)(nil)
	_ driver.StmtExecContext  = (*countingStmt)(nil)
	_ driver.StmtQueryContext = (*countingStmt)(nil)
)

func (k *countingConn) Prepare(query string) (driver.Stmt, error) {
	return k.PrepareContext(context.Background(), query)
}

func (k *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var st driver.Stmt
	var err error
	if p, ok := k.Conn.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = k.Conn.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	return &countingStmt{Stmt: st, c: k.c, query: query}, nil
}

func (k *countingConn) Begin() (driver.Tx, error) {
	return k.BeginTx(context.Background(), driver.TxOptions{})
}

func (k *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	k.c.txControl.Add(1)
	var tx driver.Tx
	var err error
	if b, ok := k.Conn.(driver.ConnBeginTx); ok {
		tx, err = b.BeginTx(ctx, opts)
	} else {
		tx, err = k.Conn.Begin() //nolint:staticcheck // fallback for drivers without BeginTx
	}
	if err != nil {
		return nil, err
	}
	return &countingTx{Tx: tx, c: k.c}, nil
}

func (k *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return counted(k, query, func(e driver.ExecerContext) (driver.Result, error) { return e.ExecContext(ctx, query, args) })
}

func (k *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return counted(k, query, func(q driver.QueryerContext) (driver.Rows, error) { return q.QueryContext(ctx, query, args) })
}

// counted runs query with call when the connection offers it (C), and counts it unless the driver skipped it.
func counted[R, C any](k *countingConn, query string, call func(C) (R, error)) (R, error) {
	conn, ok := k.Conn.(C)
	if !ok {
		var none R
		return none, driver.ErrSkip
	}
	r, err := call(conn)
	if err != driver.ErrSkip {
		k.c.statement(query)
	}
	return r, err
}

type countingTx struct {
	driver.Tx
	c *SQLCounter
}

func (t *countingTx) Commit() error {
	t.c.txControl.Add(1)
	return t.Tx.Commit()
}

func (t *countingTx) Rollback() error {
	t.c.txControl.Add(1)
	return t.Tx.Rollback()
}

type countingStmt struct {
	driver.Stmt
	c     *SQLCounter
	query string
}

func (s *countingStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.c.statement(s.query)
	return s.Stmt.Exec(args) //nolint:staticcheck // forwarded as is
}

func (s *countingStmt) Query(args []driver.Value) (driver.Rows, error) {
	s.c.statement(s.query)
	return s.Stmt.Query(args) //nolint:staticcheck // forwarded as is
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.c.statement(s.query)
	if e, ok := s.Stmt.(driver.StmtExecContext); ok {
		return e.ExecContext(ctx, args)
	}
	return s.Stmt.Exec(namedToValues(args)) //nolint:staticcheck // fallback for old drivers
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.c.statement(s.query)
	if q, ok := s.Stmt.(driver.StmtQueryContext); ok {
		return q.QueryContext(ctx, args)
	}
	return s.Stmt.Query(namedToValues(args)) //nolint:staticcheck // fallback for old drivers
}

func namedToValues(args []driver.NamedValue) []driver.Value {
	out := make([]driver.Value, len(args))
	for i, a := range args {
		out[i] = a.Value
	}
	return out
}
