package delivery

import (
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/eventtype"
	"github.com/adal-relay/adal/filter"
)

// route narrows each item's recipients to those subscribed to its request's event type (eventtype.Matches) and
// whose routing filter it matches, and lists the others in its FilteredOut. A recipient without a filter costs a nil check; a request's body is parsed at most once,
// and only when a filter looks at it. A stored rule that no longer compiles matches nothing: a filter that
// cannot be judged must not let through what it was written to keep out.
func route(items []Incoming) {
	for i := range items {
		it := &items[i]
		var in *filter.Input
		var kept []*ent.Recipient // nil until a recipient is filtered out: the server's list is shared
		for k, r := range it.Recipients {
			if !eventtype.Matches(r.EventTypes, it.Request.EventType) {
				if kept == nil {
					kept = append(make([]*ent.Recipient, 0, len(it.Recipients)), it.Recipients[:k]...)
				}
				it.FilteredOut = append(it.FilteredOut, r.ID)
				continue
			}
			if r.RoutingFilter == nil {
				if kept != nil {
					kept = append(kept, r)
				}
				continue
			}
			if in == nil {
				req := it.Request
				in = &filter.Input{Method: req.Method, Path: req.Path, Query: req.Query, Header: req.Header, Body: req.Body}
			}
			f, err := filter.Cached(*r.RoutingFilter)
			if err == nil && f.Match(in) {
				if kept != nil {
					kept = append(kept, r)
				}
				continue
			}
			if kept == nil {
				kept = append(make([]*ent.Recipient, 0, len(it.Recipients)), it.Recipients[:k]...)
			}
			it.FilteredOut = append(it.FilteredOut, r.ID)
		}
		if kept != nil {
			it.Recipients = kept
		}
	}
}
