package bulk

import (
	"slices"
	"time"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/attempt"
	"github.com/adal-relay/adal/ent/bulkjob"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/predicate"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/search"
)

// Kind is what a job does to each delivery it matched.
type Kind = bulkjob.Kind

// Kinds.
const (
	// Retry makes a new delivery of each (as retryDelivery does, 1 credit each).
	Retry = bulkjob.KindRETRY
	// Cancel cancels each while it is still pending (as cancelDelivery does).
	Cancel = bulkjob.KindCANCEL
)

// Filter selects deliveries of one server: the current delivery of each request to each recipient (a
// delivery a retry took over is never matched again), in a state the job's kind applies to — FAILED, CANCELED
// or SUCCEEDED for a retry, PENDING for a cancel — of requests not yet expired to recipients not deleted.
// Every other field narrows it; nil fields do not.
type Filter struct {
	ServerID    int  `json:"serverId"`
	RecipientID *int `json:"recipientId,omitempty"`
	// Status is one of the statuses the kind applies to.
	Status *entdelivery.Status `json:"status,omitempty"`
	// ReceivedAfter and ReceivedBefore bound the request's received time: at or after, and before.
	ReceivedAfter  *time.Time `json:"receivedAfter,omitempty"`
	ReceivedBefore *time.Time `json:"receivedBefore,omitempty"`
	// HTTPStatusMin and HTTPStatusMax bound, inclusively, the HTTP status of the delivery's last attempt;
	// ErrorKind is that attempt's error kind. Either needs the delivery to have had an attempt.
	HTTPStatusMin *int               `json:"httpStatusMin,omitempty"`
	HTTPStatusMax *int               `json:"httpStatusMax,omitempty"`
	ErrorKind     *attempt.ErrorKind `json:"errorKind,omitempty"`
	// Search is text the request's path, query, headers or body contain (package search).
	Search *string `json:"search,omitempty"`
}

// statuses are the delivery statuses each kind applies to.
func statuses(k Kind) []entdelivery.Status {
	if k == Cancel {
		return []entdelivery.Status{entdelivery.StatusPENDING}
	}
	return []entdelivery.Status{entdelivery.StatusFAILED, entdelivery.StatusCANCELED, entdelivery.StatusSUCCEEDED}
}

// validate checks f for a job of kind k and returns its search term, if any.
func (f Filter) validate(op string, k Kind) (*search.Term, error) {
	bad := func(format string, args ...any) error { return fault.E(op, fault.InvalidInput, format, args...) }
	if f.ServerID == 0 {
		return nil, bad("serverId is required")
	}
	if f.Status != nil && !slices.Contains(statuses(k), *f.Status) {
		if k == Cancel {
			return nil, bad("only PENDING deliveries can be canceled; status must be PENDING or absent")
		}
		return nil, bad("a retry is allowed from FAILED, CANCELED or SUCCEEDED; status must be one of those or absent")
	}
	for _, s := range []*int{f.HTTPStatusMin, f.HTTPStatusMax} {
		if s != nil && (*s < 100 || *s > 599) {
			return nil, bad("httpStatusMin and httpStatusMax must be between 100 and 599")
		}
	}
	if f.HTTPStatusMin != nil && f.HTTPStatusMax != nil && *f.HTTPStatusMin > *f.HTTPStatusMax {
		return nil, bad("httpStatusMin is above httpStatusMax")
	}
	if f.ReceivedAfter != nil && f.ReceivedBefore != nil && !f.ReceivedAfter.Before(*f.ReceivedBefore) {
		return nil, bad("receivedAfter must be before receivedBefore")
	}
	if f.Search == nil {
		return nil, nil
	}
	t, err := search.Parse(op, *f.Search)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// deliveries is the query of the deliveries f matches for a job of kind k at now, under client's viewer.
func (f Filter) deliveries(client *ent.Client, dialect string, k Kind, term *search.Term, now time.Time) *ent.DeliveryQuery {
	q := client.Delivery.Query().Where(
		entdelivery.Superseded(false),
		entdelivery.StatusIn(statuses(k)...),
		entdelivery.HasRecipientWith(recipient.DeletedAtIsNil()),
	)
	if f.Status != nil {
		q.Where(entdelivery.StatusEQ(*f.Status))
	}
	if f.RecipientID != nil {
		q.Where(entdelivery.RecipientID(*f.RecipientID))
	}
	// Expired requests are never attempted again and cannot be retried: the purge takes them.
	requests := []predicate.Request{request.ServerID(f.ServerID), request.ExpiresAtGT(now)}
	if f.ReceivedAfter != nil {
		requests = append(requests, request.ReceivedAtGTE(f.ReceivedAfter.UTC()))
	}
	if f.ReceivedBefore != nil {
		requests = append(requests, request.ReceivedAtLT(f.ReceivedBefore.UTC()))
	}
	if term != nil {
		requests = append(requests, func(s *entsql.Selector) {
			s.Where(term.Match(dialect, search.Columns{
				Path: s.C(request.FieldPath), Query: s.C(request.FieldQuery),
				Headers: s.C(request.FieldHeaders), Body: s.C(request.FieldBody),
			}))
		})
	}
	q.Where(entdelivery.HasRequestWith(requests...))
	if f.HTTPStatusMin != nil || f.HTTPStatusMax != nil || f.ErrorKind != nil {
		q.Where(f.lastAttempt)
	}
	return q
}

// lastAttempt holds when the delivery's last attempt (number attempt_count, one row by the unique index)
// has the filter's HTTP status and error kind.
func (f Filter) lastAttempt(s *entsql.Selector) {
	t := entsql.Table(attempt.Table)
	conds := []*entsql.Predicate{
		entsql.ColumnsEQ(t.C(attempt.FieldDeliveryID), s.C(entdelivery.FieldID)),
		entsql.ColumnsEQ(t.C(attempt.FieldNumber), s.C(entdelivery.FieldAttemptCount)),
	}
	if f.HTTPStatusMin != nil {
		conds = append(conds, entsql.GTE(t.C(attempt.FieldHTTPStatus), *f.HTTPStatusMin))
	}
	if f.HTTPStatusMax != nil {
		conds = append(conds, entsql.LTE(t.C(attempt.FieldHTTPStatus), *f.HTTPStatusMax))
	}
	if f.ErrorKind != nil {
		conds = append(conds, entsql.EQ(t.C(attempt.FieldErrorKind), string(*f.ErrorKind)))
	}
	s.Where(entsql.Exists(entsql.Select(t.C(attempt.FieldID)).From(t).Where(entsql.And(conds...))))
}
