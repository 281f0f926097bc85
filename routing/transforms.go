package routing

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/transformversion"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/transform"
	"github.com/adal-relay/adal/viewer"
)

// SetTransform saves source as the recipient's new transformation version and makes it current; an empty
// source saves a version that removes the transformation. A source that does not compile is refused with its
// line and column.
func (s *Service) SetTransform(ctx context.Context, client *ent.Client, recipientID int, source string) (*ent.Recipient, error) {
	const op = "routing.SetTransform"
	r, err := liveRecipient(ctx, client, op, recipientID)
	if err != nil {
		return nil, err
	}
	if r.Method == recipient.MethodCLI {
		return nil, fault.E(op, fault.InvalidInput, "a CLI recipient's requests are shaped by the local service; transformations are for DIRECT_HTTP and broker recipients")
	}
	if strings.TrimSpace(source) != "" {
		if _, err := transform.Compile(source); err != nil {
			return nil, fault.E(op, fault.InvalidInput, "%s", err.Error())
		}
	}
	// Under the recipient's row lock, so two saves never take one number.
	if _, err := client.Recipient.Query().Where(recipient.ID(r.ID)).Select(recipient.FieldID).Modify(lockRow).Ints(ctx); err != nil {
		return nil, storage.Err(op, "recipient", err)
	}
	last := 0
	prev, err := client.TransformVersion.Query().Where(transformversion.RecipientID(r.ID)).
		Order(ent.Desc(transformversion.FieldNumber)).First(ctx)
	switch {
	case err == nil:
		last = prev.Number
	case !ent.IsNotFound(err):
		return nil, storage.Err(op, "transformation", err)
	}
	v, _ := viewer.FromContext(ctx)
	by := v.Subject
	if by == "" {
		by = string(v.Role)
	}
	tv, err := client.TransformVersion.Create().SetTenantID(r.TenantID).SetRecipientID(r.ID).SetNumber(last + 1).
		SetSource(source).SetCreatedBy(by).SetCreatedAt(s.now()).Save(ctx)
	if err != nil {
		return nil, storage.Err(op, "transformation", err)
	}
	u := r.Update()
	if strings.TrimSpace(source) == "" {
		u.ClearTransformVersionID()
	} else {
		u.SetTransformVersionID(tv.ID)
	}
	r, err = u.Save(ctx)
	return r, storage.Err(op, "recipient", err)
}

// TryTransform runs source on a stored request the viewer may read, as an attempt would, and saves nothing.
func (s *Service) TryTransform(ctx context.Context, client *ent.Client, source string, requestID int) (*TransformResult, error) {
	const op = "routing.TryTransform"
	p, err := transform.Compile(source)
	if err != nil {
		return nil, fault.E(op, fault.InvalidInput, "%s", err.Error())
	}
	req, err := client.Request.Get(ctx, requestID)
	if err != nil {
		return nil, storage.Err(op, "request", err)
	}
	in := transform.Request{Method: req.Method, Path: "/" + strings.TrimPrefix(req.Path, "/"), Query: req.Query,
		Header: http.Header(req.Headers), Body: req.Body}
	out, cancel, err := p.Run(ctx, in, transform.Limits{})
	res := &TransformResult{Cancelled: cancel}
	var terr *transform.Error
	switch {
	case errors.As(err, &terr):
		res.Error, res.ErrorReason = &terr.Message, &terr.Reason
	case err != nil:
		return nil, fault.Wrap(op, fault.Internal, err)
	case !cancel:
		body := strings.ToValidUTF8(string(out.Body), "\uFFFD")
		res.Method, res.Path, res.Query, res.Body = &out.Method, &out.Path, &out.Query, &body
		for name, values := range out.Header {
			for _, v := range values {
				res.Headers = append(res.Headers, Header{Name: name, Value: v})
			}
		}
		slices.SortFunc(res.Headers, func(a, b Header) int { return strings.Compare(a.Name, b.Name) })
	}
	return res, nil
}
