package inbound

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/eventtype"
	"github.com/adal-relay/adal/ent/server"
	evt "github.com/adal-relay/adal/eventtype"
	"github.com/adal-relay/adal/viewer"
)

// typing is where a server reads its requests' event type, and how it checks their bodies against the type's
// schema; nil for a server that types nothing.
type typing struct {
	source evt.Source
	mode   server.SchemaValidation
}

func typingOf(srv *ent.Server) *typing {
	src := evt.Source{Header: srv.EventTypeHeader, JSONPath: srv.EventTypePath}
	if src == (evt.Source{}) {
		return nil
	}
	return &typing{source: src, mode: srv.SchemaValidation}
}

// schemasTTL is how long a tenant's compiled schemas are used before they are read again: a schema changed
// applies within it, as the key cache's settings do.
const schemasTTL = 5 * time.Second

// schemas keeps each tenant's event type schemas, compiled, for intake: one read per tenant every schemasTTL,
// and a schema compiled again only when it changed.
type schemas struct {
	client *ent.Client
	now    func() time.Time

	mu      sync.Mutex
	tenants map[int]*tenantSchemas
}

type tenantSchemas struct {
	ready   chan struct{} // closed once byName or err is set
	byName  map[string]*evt.Schema
	err     error
	expires time.Time
	// compiled keeps each type's schema by its update time, so a reload recompiles only what changed.
	compiled map[int]compiledSchema
}

type compiledSchema struct {
	updated time.Time
	schema  *evt.Schema
}

func newSchemas(client *ent.Client, now func() time.Time) *schemas {
	return &schemas{client: client, now: now, tenants: map[int]*tenantSchemas{}}
}

// of returns the tenant's schemas by type name, reading them when they are older than schemasTTL; concurrent
// callers wait for one read.
func (s *schemas) of(ctx context.Context, tenantID int) (map[string]*evt.Schema, error) {
	now := s.now()
	s.mu.Lock()
	t := s.tenants[tenantID]
	if t != nil && now.Before(t.expires) {
		s.mu.Unlock()
		select {
		case <-t.ready:
			return t.byName, t.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	prev := t
	t = &tenantSchemas{ready: make(chan struct{}), expires: now.Add(schemasTTL)}
	s.tenants[tenantID] = t
	s.mu.Unlock()
	var compiled map[int]compiledSchema
	if prev != nil {
		<-prev.ready
		compiled = prev.compiled
	}
	t.byName, t.compiled, t.err = s.read(ctx, tenantID, compiled)
	if t.err != nil {
		t.expires = now // the next request reads again
	}
	close(t.ready)
	return t.byName, t.err
}

func (s *schemas) read(ctx context.Context, tenantID int, before map[int]compiledSchema) (map[string]*evt.Schema, map[int]compiledSchema, error) {
	types, err := s.client.EventType.Query().
		Where(eventtype.TenantID(tenantID), eventtype.SchemaNotNil()).
		Select(eventtype.FieldName, eventtype.FieldSchema, eventtype.FieldUpdatedAt).
		All(viewer.SystemContext(ctx))
	if err != nil {
		return nil, nil, err
	}
	byName := make(map[string]*evt.Schema, len(types))
	compiled := make(map[int]compiledSchema, len(types))
	for _, et := range types {
		c, ok := before[et.ID]
		if !ok || !c.updated.Equal(et.UpdatedAt) {
			sch, err := evt.CompileSchema([]byte(*et.Schema))
			if err != nil {
				continue // checked when saved: a schema that no longer compiles checks nothing
			}
			c = compiledSchema{updated: et.UpdatedAt, schema: sch}
		}
		compiled[et.ID], byName[et.Name] = c, c.schema
	}
	return byName, compiled, nil
}

// checkType reads the request's event type and, when its server validates bodies, checks the body against
// the type's schema. It returns the type and, under SHADOW, why the body failed; under ENFORCE a failing body
// is answered 422 with the first error, and answered is its status (the request is neither stored nor
// charged).
func (h *Handler) checkType(ctx context.Context, w http.ResponseWriter, info *keyInfo, header http.Header, body []byte) (eventType, schemaError string, answered int) {
	t := info.senders.typing()
	if t == nil {
		return "", "", 0
	}
	doc := evt.NewBody(body) // decoded once, for the type and the schema
	eventType = t.source.TypeOfBody(header, doc)
	if eventType == "" || t.mode == server.SchemaValidationOFF {
		return eventType, "", 0
	}
	byName, err := h.schemas.of(ctx, info.tenantID)
	if err != nil {
		return "", "", h.unavailable(w, "read event types", err)
	}
	sch := byName[eventType]
	if sch == nil {
		return eventType, "", 0
	}
	err = sch.ValidateBody(doc)
	if err == nil {
		return eventType, "", 0
	}
	if t.mode == server.SchemaValidationENFORCE {
		out := map[string]string{"error": "body does not follow the schema of event type " + eventType + ": " + err.Error(),
			"eventType": eventType}
		var verr *evt.ValidationError
		if errors.As(err, &verr) {
			out["pointer"] = verr.Pointer
		}
		return "", "", h.answer(w, http.StatusUnprocessableEntity, out)
	}
	return eventType, err.Error(), 0
}
