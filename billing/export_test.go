package billing

import (
	"context"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/ledgerentry"
)

// SettleWithEnt is Settle as it runs on SQLite, with ent's statements, on any database: the Go path the
// set-wise statements are held to.
func (s *Service) SettleWithEnt(ctx context.Context, client *ent.Client, rs []Reservation, reason ledgerentry.Reason, refs [][]string) error {
	return s.settle(ctx, client, rs, reason, refs, false)
}
