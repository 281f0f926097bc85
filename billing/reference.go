package billing

import "fmt"

// The references of ledger entries name what a change of balance paid for or came from, one format per kind
// of thing, so a ledger can be joined back to it. A format is written here and nowhere else.

// RequestReference names the accepted (or replayed) request an entry paid for.
func RequestReference(requestID int) string { return fmt.Sprintf("request:%d", requestID) }

// RequestReferenceSQL is RequestReference of the SQL expression id, for entries written set-wise.
func RequestReferenceSQL(id string) string { return "'request:' || " + id }

// DeliveryReference names the delivery a manual retry was made of.
func DeliveryReference(deliveryID int) string { return fmt.Sprintf("delivery:%d", deliveryID) }

// OutboundReference names the outbound job an entry paid for.
func OutboundReference(jobID int) string { return fmt.Sprintf("outbound:%d", jobID) }

// PlanReference names the plan whose monthly credits an entry grants.
func PlanReference(planID int) string { return fmt.Sprintf("plan:%d", planID) }

// PlanChangeReference names a tenant's move from one plan to another.
func PlanChangeReference(fromPlanID, toPlanID int) string {
	return fmt.Sprintf("plan:%d->%d", fromPlanID, toPlanID)
}
