package model

import "github.com/adal-relay/adal/ent"

// RequestConnection is a page of the requests list: ent's connection and, when the list was a search, how far
// the search went.
type RequestConnection struct {
	*ent.RequestConnection
	// Search is nil unless the list was asked with search.
	Search *RequestSearch
}
