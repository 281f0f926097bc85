package clihub

import (
	"context"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/storage"
)

// Attached is attached, for tests of the claim.
type Attached = attached

// NewAttached describes a recipient attached since the given time.
func NewAttached(recipientID int, since time.Time) Attached {
	return attached{recipientID: recipientID, since: since}
}

// ClaimForTest is the hub's claim statement.
func ClaimForTest(ctx context.Context, db *storage.DB, now time.Time, limit int, owner string, recipients ...Attached) ([]delivery.Claim, error) {
	return claim(ctx, db, now, limit, time.Minute, owner, recipients)
}

// ReleaseForTest is the hub's release statement.
func ReleaseForTest(ctx context.Context, db *storage.DB, c delivery.Claim) error {
	return release(ctx, db, c)
}
