package storage

import (
	"context"
	"database/sql/driver"
)

// ForwardingConn is a connection that wraps another (lib/pq's) and forwards to it every optional interface
// that one implements, falling back as database/sql does where it implements none. A connection that changes
// what some of them do embeds it and writes only those.
type ForwardingConn struct{ driver.Conn }

var (
	_ driver.ConnBeginTx        = ForwardingConn{}
	_ driver.ConnPrepareContext = ForwardingConn{}
	_ driver.Pinger             = ForwardingConn{}
	_ driver.NamedValueChecker  = ForwardingConn{}
	_ driver.SessionResetter    = ForwardingConn{}
	_ driver.Validator          = ForwardingConn{}
)

func (c ForwardingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c ForwardingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if p, ok := c.Conn.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return c.Conn.Prepare(query)
}

func (c ForwardingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c ForwardingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return c.Conn.Begin() //nolint:staticcheck // fallback for drivers without BeginTx
}

func (c ForwardingConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c ForwardingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if k, ok := c.Conn.(driver.NamedValueChecker); ok {
		return k.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c ForwardingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c ForwardingConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}
