package routing

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/eventtype"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/ent/transformversion"
	evt "github.com/adal-relay/adal/eventtype"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage"
)

// MaxEventTypes bounds the event types a recipient subscribes to.
const MaxEventTypes = 100

// EventTypeInput describes an event type; nil fields keep their value on update.
type EventTypeInput struct {
	TenantID    *int // operators only, on create
	Name        *string
	Description *string
	Schema      *string
	ClearSchema bool
}

// CreateEventType names a new event type in the viewer's tenant (operators name one).
func (s *Service) CreateEventType(ctx context.Context, client *ent.Client, in EventTypeInput) (*ent.EventType, error) {
	const op = "routing.CreateEventType"
	tenantID, err := managedTenant(ctx, op, in.TenantID)
	if err != nil {
		return nil, err
	}
	if in.Name == nil {
		return nil, fault.E(op, fault.InvalidInput, "name is required")
	}
	name := strings.TrimSpace(*in.Name)
	if err := evt.CheckName(name); err != nil {
		return nil, fault.E(op, fault.InvalidInput, "name: %s", err.Error())
	}
	if err := checkEventType(op, in); err != nil {
		return nil, err
	}
	exists, err := client.EventType.Query().Where(eventtype.TenantID(tenantID), eventtype.Name(name)).Exist(ctx)
	if err != nil {
		return nil, storage.Err(op, "event type", err)
	}
	if exists {
		return nil, fault.E(op, fault.Conflict, "event type %q exists already", name)
	}
	now := s.now()
	c := client.EventType.Create().SetTenantID(tenantID).SetName(name).SetCreatedAt(now).SetUpdatedAt(now).
		SetNillableSchema(in.Schema)
	if in.Description != nil {
		c.SetDescription(strings.TrimSpace(*in.Description))
	}
	et, err := c.Save(ctx)
	return et, storage.Err(op, "event type", err)
}

// UpdateEventType changes an event type's description or schema; its name stays, as requests carry it.
func (s *Service) UpdateEventType(ctx context.Context, client *ent.Client, id int, in EventTypeInput) (*ent.EventType, error) {
	const op = "routing.UpdateEventType"
	if err := requireManagerOf(ctx, op); err != nil {
		return nil, err
	}
	if in.Name != nil {
		return nil, fault.E(op, fault.InvalidInput, "an event type's name cannot change; create another")
	}
	if err := checkEventType(op, in); err != nil {
		return nil, err
	}
	et, err := client.EventType.Get(ctx, id)
	if err != nil {
		return nil, storage.Err(op, "event type", err)
	}
	u := et.Update().SetUpdatedAt(s.now())
	if in.Description != nil {
		u.SetDescription(strings.TrimSpace(*in.Description))
	}
	switch {
	case in.ClearSchema:
		u.ClearSchema()
	case in.Schema != nil:
		u.SetSchema(*in.Schema)
	}
	et, err = u.Save(ctx)
	return et, storage.Err(op, "event type", err)
}

// DeleteEventType deletes an event type: requests keep the name, and subscriptions the pattern.
func (s *Service) DeleteEventType(ctx context.Context, client *ent.Client, id int) (*ent.EventType, error) {
	const op = "routing.DeleteEventType"
	if err := requireManagerOf(ctx, op); err != nil {
		return nil, err
	}
	et, err := client.EventType.Get(ctx, id)
	if err != nil {
		return nil, storage.Err(op, "event type", err)
	}
	return et, storage.Err(op, "event type", client.EventType.DeleteOne(et).Exec(ctx))
}

func checkEventType(op string, in EventTypeInput) error {
	if in.Description != nil && len(*in.Description) > 1000 {
		return fault.E(op, fault.InvalidInput, "description must be at most 1000 characters")
	}
	if in.Schema != nil && !in.ClearSchema {
		if _, err := evt.CompileSchema([]byte(*in.Schema)); err != nil {
			return fault.E(op, fault.InvalidInput, "schema: %s", err.Error())
		}
	}
	return nil
}

// typeSettings applies a server input's event type source and schema validation to m; srv is the server as
// stored (nil on create).
func typeSettings(op string, m *ent.ServerMutation, srv *ent.Server, in ServerInput) error {
	src := evt.Source{}
	if srv != nil {
		src = evt.Source{Header: srv.EventTypeHeader, JSONPath: srv.EventTypePath}
	}
	switch {
	case in.ClearEventTypeSource:
		src = evt.Source{}
	case in.EventTypeHeader != nil && in.EventTypePath != nil:
		return fault.E(op, fault.InvalidInput, "give eventTypeHeader or eventTypePath, not both")
	case in.EventTypeHeader != nil:
		src = evt.Source{Header: strings.TrimSpace(*in.EventTypeHeader)}
	case in.EventTypePath != nil:
		src = evt.Source{JSONPath: strings.TrimSpace(*in.EventTypePath)}
	}
	if src != (evt.Source{}) {
		if err := src.Validate(); err != nil {
			return fault.E(op, fault.InvalidInput, "%s", err.Error())
		}
	}
	m.SetEventTypeHeader(src.Header)
	m.SetEventTypePath(src.JSONPath)
	if in.SchemaValidation != nil {
		if err := server.SchemaValidationValidator(*in.SchemaValidation); err != nil {
			return fault.E(op, fault.InvalidInput, "schemaValidation must be OFF, SHADOW or ENFORCE")
		}
		m.SetSchemaValidation(*in.SchemaValidation)
	}
	return nil
}

// validateShape checks a recipient's event types and authentication, and encodes the authentication.
func (rs *recipientSettings) validateShape(op string) error {
	if len(rs.eventTypes) > MaxEventTypes {
		return fault.E(op, fault.InvalidInput, "eventTypes: at most %d", MaxEventTypes)
	}
	for i, t := range rs.eventTypes {
		t = strings.TrimSpace(t)
		if err := evt.CheckPattern(t); err != nil {
			return fault.E(op, fault.InvalidInput, "eventTypes[%d]: %s", i, err.Error())
		}
		rs.eventTypes[i] = t
	}
	slices.Sort(rs.eventTypes)
	rs.eventTypes = slices.Compact(rs.eventTypes)
	if rs.authIn != nil {
		if rs.method != recipient.MethodDIRECT_HTTP {
			return fault.E(op, fault.InvalidInput, "auth is only for DIRECT_HTTP recipients")
		}
		if err := rs.authIn.Validate(); err != nil {
			return fault.E(op, fault.InvalidInput, "auth: %s", err.Error())
		}
		b, err := json.Marshal(rs.authIn)
		if err != nil {
			return fault.Wrap(op, fault.Internal, err)
		}
		rs.auth, rs.authIn = b, nil
	}
	return nil
}

// AuthSummary is a recipient's authentication as the API shows it: what is set, never a secret.
type AuthSummary struct {
	HeaderNames               []string
	BasicUsername             *string
	Bearer                    bool
	Oauth2TokenURL            *string
	Oauth2ClientID            *string
	Oauth2Scopes              []string
	ClientCertificateSubject  *string
	ClientCertificateNotAfter *time.Time
}

// SummaryOf is r's authentication without its secrets; nil when it has none.
func SummaryOf(r *ent.Recipient) *AuthSummary {
	c := delivery.AuthOf(r)
	if c == nil {
		return nil
	}
	sum := c.Summary()
	out := &AuthSummary{HeaderNames: sum.HeaderNames, Bearer: sum.HasBearer}
	if out.HeaderNames == nil {
		out.HeaderNames = []string{}
	}
	if sum.Basic != nil {
		out.BasicUsername = &sum.Basic.Username
	}
	if o := sum.OAuth2; o != nil {
		out.Oauth2TokenURL, out.Oauth2ClientID, out.Oauth2Scopes = &o.TokenURL, &o.ClientID, o.Scopes
	}
	if cert := sum.ClientCertificate; cert != nil && cert.Err == "" {
		out.ClientCertificateSubject, out.ClientCertificateNotAfter = &cert.Subject, &cert.NotAfter
	}
	return out
}

// TransformResult is what a transformation made of a request: the request changed, a cancellation, or why it
// failed.
type TransformResult struct {
	Cancelled   bool
	Method      *string
	Path        *string
	Query       *string
	Headers     []Header
	Body        *string
	Error       *string
	ErrorReason *string
}

// Header is one header line of a TransformResult.
type Header struct{ Name, Value string }

// CurrentTransform is the recipient's current transformation version; nil when it has none.
func CurrentTransform(ctx context.Context, client *ent.Client, r *ent.Recipient) (*ent.TransformVersion, error) {
	if r.TransformVersionID == nil {
		return nil, nil
	}
	tv, err := client.TransformVersion.Get(ctx, *r.TransformVersionID)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	return tv, err
}

// TransformVersions are every saved version of r's transformation, newest first.
func TransformVersions(ctx context.Context, client *ent.Client, r *ent.Recipient) ([]*ent.TransformVersion, error) {
	vs, err := client.TransformVersion.Query().Where(transformversion.RecipientID(r.ID)).
		Order(ent.Desc(transformversion.FieldNumber)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("transformation versions: %w", err)
	}
	return vs, nil
}
