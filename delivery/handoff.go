package delivery

import (
	"time"

	"github.com/adal-relay/adal/ent"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
)

// Handoff is a dispatcher's offer of worker slots that are free now. StoreBatch stores up to Slots of the new
// deliveries to direct, active recipients already claimed for Owner, as the dispatcher's claim would leave
// them: IN_PROGRESS, first attempt counted, under a lease of Lease. The caller starts them once the
// transaction commits (Stored.Claimed). Such a delivery skips the round through the table — the wake, the
// claim statement, a second row version with its index entries — which at load is most of the time from
// accept to first byte and a share of the database's work per delivery. Its lease protects it as any claim's
// does: if the process dies before the attempt is recorded, the rescuer records it INTERRUPTED and it is
// retried. The zero Handoff claims nothing.
type Handoff struct {
	Owner string
	Lease time.Duration
	Slots int
	// Tenants, when set, splits Slots between tenants: a tenant's deliveries take at most its number of them, and
	// a tenant it does not name gets none (the dispatcher's fair share of its workers). Nil leaves Slots to
	// whichever deliveries come first.
	Tenants map[int]int
}

// taker hands out a Handoff's slots to deliveries in arrival order.
type taker struct {
	slots   int
	tenants map[int]int
}

func (h Handoff) taker() *taker {
	t := &taker{slots: h.Slots}
	if h.Tenants != nil {
		t.tenants = make(map[int]int, len(h.Tenants))
		for id, n := range h.Tenants {
			t.tenants[id] = n
		}
	}
	return t
}

// take reports whether a new delivery of tenant may be stored claimed, and counts its slot if so.
func (t *taker) take(tenant int) bool {
	if t.slots == 0 || (t.tenants != nil && t.tenants[tenant] == 0) {
		return false
	}
	t.slots--
	if t.tenants != nil {
		t.tenants[tenant]--
	}
	return true
}

// claim marks a new delivery claimed under h, as claimed at now.
func (h Handoff) claim(d *ent.Delivery, now time.Time) {
	expires := now.Add(h.Lease)
	d.Status = entdelivery.StatusIN_PROGRESS
	d.AttemptCount = 1
	d.FirstAttemptAt, d.AttemptStartedAt, d.LeaseExpiresAt = &now, &now, &expires
	d.LeaseOwner = h.Owner
	d.Backlog = false
}

// claimOf is the claim of a delivery stored claimed at now.
func claimOf(d *ent.Delivery, serverID int, now time.Time) Claim {
	return Claim{
		DeliveryID: d.ID, TenantID: d.TenantID, RequestID: d.RequestID, ServerID: serverID,
		RecipientID: d.RecipientID, Attempt: 1, MaxAttempts: d.MaxAttempts, Schedule: Schedule(d.RetrySchedule),
		FirstAttemptAt: now, StartedAt: now, Owner: d.LeaseOwner, ExpiresAt: d.ExpiresAt,
	}
}
