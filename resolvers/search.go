package resolvers

import (
	"context"

	"entgo.io/contrib/entgql"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/graph/model"
	"github.com/adal-relay/adal/search"
	"github.com/adal-relay/adal/viewer"
)

// searchRequests answers requests(search: …): one bounded search (package search) turned into a connection
// whose endCursor is where the next page searches on from.
func (r *Resolver) searchRequests(ctx context.Context, client *ent.Client, serverID int, text string,
	after *entgql.Cursor[int], first *int, before *entgql.Cursor[int], last *int,
	orderBy *ent.RequestOrder, where *ent.RequestWhereInput) (*model.RequestConnection, error) {
	const op = "requests"
	term, err := search.Parse(op, text)
	if err != nil {
		return nil, err
	}
	if before != nil || last != nil {
		return nil, fault.E(op, fault.InvalidInput, "a search pages forward only: use first and after")
	}
	q := search.Query{ServerID: serverID, Term: term, After: after, First: *first,
		Ascending: orderBy.Direction == entgql.OrderDirectionAsc}
	if where != nil {
		p, err := where.P()
		switch {
		case err == ent.ErrEmptyRequestWhereInput:
		case err != nil:
			return nil, fault.E(op, fault.InvalidInput, "where: %v", err)
		default:
			q.Where = p
		}
	}
	v, _ := viewer.FromContext(ctx)
	res, err := r.Search.Requests(ctx, client, v.TenantID, q)
	if err != nil {
		return nil, err
	}
	conn := &ent.RequestConnection{TotalCount: len(res.Requests), PageInfo: entgql.PageInfo[int]{
		HasNextPage: res.HasNextPage, HasPreviousPage: after != nil, EndCursor: res.Next,
	}}
	for _, req := range res.Requests {
		conn.Edges = append(conn.Edges, &ent.RequestEdge{Node: req,
			Cursor: entgql.Cursor[int]{ID: req.ID, Value: req.ReceivedAt}})
	}
	if len(conn.Edges) > 0 {
		conn.PageInfo.StartCursor = &conn.Edges[0].Cursor
	}
	return &model.RequestConnection{RequestConnection: conn, Search: &model.RequestSearch{
		Scanned: res.Scanned, StoppedEarly: res.StoppedEarly, ExaminedTo: res.ExaminedTo,
	}}, nil
}
