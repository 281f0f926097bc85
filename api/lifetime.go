package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/adal-relay/adal/auth"
)

// closeUnauthorized is the graphql-transport-ws close code for a connection whose credentials are no
// longer good; clients know it as "authenticate again", not as a network failure to retry blindly.
const closeUnauthorized = 4401

// lifetimeKey carries a websocket's *lifetime from the upgrade request to its init and its close.
type lifetimeKey struct{}

// lifetime links a websocket connection to the token context its init created: gqlgen closes a connection
// whose context ended with a generic "terminated", so the close frame is rewritten to say why.
type lifetime struct {
	mu  sync.Mutex
	ctx context.Context // the watched context from auth.Watch; nil before init or without a token
}

// withTokenLifetime gives every websocket upgrade a lifetime the transport's connection and init share.
func withTokenLifetime(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			r = r.WithContext(context.WithValue(r.Context(), lifetimeKey{}, &lifetime{}))
		}
		next.ServeHTTP(w, r)
	})
}

// watchToken records the watched token context of the connection being initialised.
func watchToken(ctx context.Context) {
	if l, ok := ctx.Value(lifetimeKey{}).(*lifetime); ok {
		l.mu.Lock()
		l.ctx = ctx
		l.mu.Unlock()
	}
}

// reason says why the connection must close, if its token died.
func (l *lifetime) reason() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		return "", false
	}
	switch cause := context.Cause(l.ctx); {
	case errors.Is(cause, auth.ErrTokenRevoked), errors.Is(cause, auth.ErrTokenExpired):
		return cause.Error(), true
	}
	return "", false
}

// tokenLifetime wraps the websocket implementation so a connection closed because its token died says so.
type tokenLifetime struct {
	transport.WebsocketImplementation
}

// Accept accepts the connection and ties it to the request's lifetime.
func (t tokenLifetime) Accept(w http.ResponseWriter, r *http.Request, o transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	c, err := t.WebsocketImplementation.Accept(w, r, o)
	l, ok := r.Context().Value(lifetimeKey{}).(*lifetime)
	if err != nil || !ok {
		return c, err
	}
	return lifetimeConn{WebsocketConn: c, life: l}, nil
}

// lifetimeConn rewrites the close frame of a connection whose token died.
type lifetimeConn struct {
	transport.WebsocketConn
	life *lifetime
}

// WriteClose closes with 4401 and the reason ("token revoked", "token expired") when the token died.
func (c lifetimeConn) WriteClose(code int, message string) error {
	if reason, ok := c.life.reason(); ok {
		code, message = closeUnauthorized, reason
	}
	return c.WebsocketConn.WriteClose(code, message)
}

// SetReadLimit passes the transport's payload limit through to the wrapped connection.
func (c lifetimeConn) SetReadLimit(limit int64) {
	if l, ok := c.WebsocketConn.(transport.WebsocketReadLimiter); ok {
		l.SetReadLimit(limit)
	}
}

// SetReadDeadline passes the transport's pong deadline through to the wrapped connection.
func (c lifetimeConn) SetReadDeadline(t time.Time) error {
	if d, ok := c.WebsocketConn.(transport.WebsocketReadDeadliner); ok {
		return d.SetReadDeadline(t)
	}
	return nil
}
