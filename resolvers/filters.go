package resolvers

import (
	"context"

	"github.com/adal-relay/adal/filter"
	"github.com/adal-relay/adal/graph/model"
	"github.com/adal-relay/adal/storage"
)

// testFilter evaluates rule against the stored request, as intake would have: testFilter's answer, kept out of
// the generated file whose argument is named after the package.
func (r *Resolver) testFilter(ctx context.Context, rule []byte, requestID int) (*model.FilterResult, error) {
	req, err := r.client(ctx).Request.Get(ctx, requestID)
	if err != nil {
		return nil, storage.Err("testFilter", "request", err)
	}
	f, err := filter.Compile(rule)
	if err != nil {
		msg := err.Error()
		return &model.FilterResult{Error: &msg}, nil
	}
	in := &filter.Input{Method: req.Method, Path: req.Path, Query: req.Query, Header: req.Headers, Body: req.Body}
	return &model.FilterResult{Matches: f.Match(in)}, nil
}
