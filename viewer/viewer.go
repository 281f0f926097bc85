// Package viewer carries who is asking through a request's context: filled by the HTTP middleware and the
// websocket init from a verified token, or set explicitly to System by background services.
package viewer

import "context"

// Role is what a viewer may do.
type Role string

const (
	// Admin is an operator: defines plans and tenants, grants credits, sees every tenant.
	Admin Role = "ADMIN"
	// Owner administers one tenant: its plan, servers and recipients.
	Owner Role = "OWNER"
	// Member reads one tenant's data and acts on its deliveries.
	Member Role = "MEMBER"
	// System is background work (scheduler, retention, billing cycle): no user, every tenant.
	System Role = "SYSTEM"
)

// Valid reports whether r is a role a token may carry.
func (r Role) Valid() bool { return r == Admin || r == Owner || r == Member }

// Viewer is the identity behind a context.
type Viewer struct {
	Role Role
	// TenantID is the tenant an Owner or Member belongs to; zero for Admin and System.
	TenantID int
	// Subject names the token holder for audit (free text).
	Subject string
}

// Global reports whether the viewer sees every tenant.
func (v Viewer) Global() bool { return v.Role == Admin || v.Role == System }

// CanManage reports whether the viewer may change tenant configuration (servers, recipients, plan).
func (v Viewer) CanManage() bool { return v.Role == Admin || v.Role == System || v.Role == Owner }

type ctxKey struct{}

// NewContext returns ctx carrying v.
func NewContext(ctx context.Context, v Viewer) context.Context {
	return context.WithValue(ctx, ctxKey{}, v)
}

// FromContext returns the viewer in ctx, if any.
func FromContext(ctx context.Context) (Viewer, bool) {
	v, ok := ctx.Value(ctxKey{}).(Viewer)
	return v, ok
}

// SystemContext marks ctx as background work that may touch every tenant. Use it narrowly: only services
// that have no user (scheduler, retention, billing cycle, inbound intake by server key).
func SystemContext(ctx context.Context) context.Context {
	return NewContext(ctx, Viewer{Role: System, Subject: "system"})
}
