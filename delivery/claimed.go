package delivery

import (
	"context"
	"fmt"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/request"
)

// Claimed is a claim with the request it delivers and the recipient it goes to.
type Claimed struct {
	Claim     Claim
	Request   *ent.Request
	Recipient *ent.Recipient
}

// LoadClaimed reads the requests and recipients of a batch of claims — two queries per batch, not per claim —
// and sets each claim's ServerID. A claim whose request or recipient is gone (purged meanwhile) is left out:
// its lease lapses and the rescuer settles it. If the reading fails, the claims stay leased; the rescuer
// records them as interrupted and they are retried.
func LoadClaimed(ctx context.Context, client *ent.Client, claims []Claim) ([]Claimed, error) {
	reqIDs := make([]int, 0, len(claims))
	recIDs := make([]int, 0, len(claims))
	for _, c := range claims {
		reqIDs = append(reqIDs, c.RequestID)
		recIDs = append(recIDs, c.RecipientID)
	}
	reqs, err := client.Request.Query().Where(request.IDIn(reqIDs...)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load requests: %w", err)
	}
	recs, err := client.Recipient.Query().Where(recipient.IDIn(recIDs...)).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("load recipients: %w", err)
	}
	reqByID := make(map[int]*ent.Request, len(reqs))
	for _, r := range reqs {
		reqByID[r.ID] = r
	}
	recByID := make(map[int]*ent.Recipient, len(recs))
	for _, r := range recs {
		recByID[r.ID] = r
	}
	out := make([]Claimed, 0, len(claims))
	for _, c := range claims {
		req, rec := reqByID[c.RequestID], recByID[c.RecipientID]
		if req == nil || rec == nil {
			continue
		}
		c.ServerID = req.ServerID
		out = append(out, Claimed{Claim: c, Request: req, Recipient: rec})
	}
	return out, nil
}

// ClaimSet is the SET list of every claim statement, whichever dialect and dispatcher: the delivery becomes
// IN_PROGRESS under a lease that lasts until leaseExpires and belongs to owner, its attempt is counted, and it
// stops being backlog. The arguments are the statement's expressions for them (placeholders, or an expression
// for owner); columns are unqualified, so it fits UPDATE deliveries and UPDATE deliveries AS d … FROM alike.
func ClaimSet(now, leaseExpires, owner string) string {
	return fmt.Sprintf(`status = 'IN_PROGRESS',
	attempt_count = attempt_count + 1,
	first_attempt_at = COALESCE(first_attempt_at, %[1]s),
	attempt_started_at = %[1]s,
	lease_expires_at = %[2]s,
	lease_owner = %[3]s,
	backlog = false`, now, leaseExpires, owner)
}
