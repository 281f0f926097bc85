package storage

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"

	"github.com/lib/pq"
)

// preparedQueries holds the statements registered with Prepared.
var preparedQueries sync.Map // query text → struct{}

// Prepared registers query as a statement of the hot path and returns it unchanged. On PostgreSQL each
// connection prepares such a statement the first time it runs it, under a name, and from then on only binds
// and executes it: the server parses and plans it once per connection rather than on every batch (for a
// statement of fixed text run hundreds of times a second, that is work the database no longer does), and
// lib/pq receives its integer and bytea columns in binary instead of as text to convert (a body as hex is
// twice its size). Only statements of fixed text qualify: each text registered is one statement kept by
// every connection for its lifetime. SQLite runs them as it runs any other.
func Prepared(query string) string {
	preparedQueries.Store(query, struct{}{})
	return query
}

func isPrepared(query string) bool {
	_, ok := preparedQueries.Load(query)
	return ok
}

// preparingConnector makes connections that keep the registered statements prepared.
type preparingConnector struct{ driver.Connector }

func (c preparingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &preparingConn{ForwardingConn: ForwardingConn{Conn: conn}, stmts: map[string]driver.Stmt{}}, nil
}

// preparingConn runs registered statements through the statement it prepared for each, and forwards
// everything else, with every optional interface of lib/pq's connection. database/sql uses a connection from
// one goroutine at a time, so stmts needs no lock. The statements go when the connection closes.
type preparingConn struct {
	ForwardingConn
	stmts map[string]driver.Stmt
}

var (
	_ driver.ExecerContext  = (*preparingConn)(nil)
	_ driver.QueryerContext = (*preparingConn)(nil)
)

// stmt returns the connection's statement for a registered query, preparing it the first time, or nil for
// a query that is not registered.
func (c *preparingConn) stmt(ctx context.Context, query string) (driver.Stmt, error) {
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	if !isPrepared(query) {
		return nil, nil
	}
	st, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.stmts[query] = st
	return st, nil
}

// forget drops the statement of query when err says the schema changed under it: PostgreSQL re-plans a
// prepared statement after most schema changes on its own, but not one whose result columns changed (another
// process migrated the schema). It fails once, then, and the next run prepares the statement anew.
func (c *preparingConn) forget(query string, err error) error {
	var pe *pq.Error
	if errors.As(err, &pe) && pe.Code == "0A000" && strings.Contains(pe.Message, "cached plan must not change result type") {
		if st, ok := c.stmts[query]; ok {
			delete(c.stmts, query)
			_ = st.Close()
		}
	}
	return err
}

func (c *preparingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return viaStmt(ctx, c, query,
		func(st driver.StmtQueryContext) (driver.Rows, error) { return st.QueryContext(ctx, args) },
		func(conn driver.QueryerContext) (driver.Rows, error) { return conn.QueryContext(ctx, query, args) })
}

func (c *preparingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return viaStmt(ctx, c, query,
		func(st driver.StmtExecContext) (driver.Result, error) { return st.ExecContext(ctx, args) },
		func(conn driver.ExecerContext) (driver.Result, error) { return conn.ExecContext(ctx, query, args) })
}

// viaStmt runs query on c's prepared statement for it with onStmt when the statement offers the call (S),
// else directly on the connection with onConn when it does (C), else answers driver.ErrSkip.
func viaStmt[R any, S any, C any](ctx context.Context, c *preparingConn, query string, onStmt func(S) (R, error), onConn func(C) (R, error)) (R, error) {
	var none R
	st, err := c.stmt(ctx, query)
	if err != nil {
		return none, err
	}
	if s, ok := st.(S); ok {
		r, err := onStmt(s)
		return r, c.forget(query, err)
	}
	conn, ok := c.Conn.(C)
	if !ok {
		return none, driver.ErrSkip
	}
	return onConn(conn)
}
