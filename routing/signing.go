package routing

import (
	"context"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
	"github.com/adal-relay/adal/webhook"
)

// SigningSecret is r's signing secret as a Standard Webhooks library takes it (whsec_ and base64), for the
// viewer in ctx: only those who manage the recipient (its tenant's owner, operators) see it; anyone else gets
// nil. Every way the API hands out a recipient (node, lists, mutations) reads it through here.
func SigningSecret(ctx context.Context, r *ent.Recipient) *string {
	if v, _ := viewer.FromContext(ctx); !v.CanManage() || len(r.SigningSecret) == 0 {
		return nil
	}
	secret := webhook.FormatSecret(r.SigningSecret)
	return &secret
}

// RotateRecipientSecret gives a live recipient a new signing key at once. The key it replaces still signs
// deliveries, after the new one, for grace (nil: DefaultKeyGrace; 0 drops it now), so the recipient can move
// to the new secret without refusing a delivery. Only one replaced key is kept: rotating again during a grace
// ends that grace.
func (s *Service) RotateRecipientSecret(ctx context.Context, client *ent.Client, id int, graceSeconds *int) (*ent.Recipient, error) {
	const op = "routing.RotateRecipientSecret"
	if err := requireManagerOf(ctx, op); err != nil {
		return nil, err
	}
	grace, err := graceOf(op, graceSeconds)
	if err != nil {
		return nil, err
	}
	// Locked, so that of two rotations at once the second replaces the first's new key, not the key both read.
	r, err := client.Recipient.Query().Where(recipient.ID(id), recipient.DeletedAtIsNil()).Modify(lockRow).Only(ctx)
	if err != nil {
		return nil, storage.Err(op, "recipient", err)
	}
	u := client.Recipient.UpdateOneID(r.ID).SetSigningSecret(webhook.NewKey())
	if grace > 0 {
		u.SetPreviousSigningSecret(r.SigningSecret).SetPreviousSecretExpiresAt(s.now().Add(grace).UTC())
	} else {
		u.ClearPreviousSigningSecret().ClearPreviousSecretExpiresAt()
	}
	r, err = u.Save(ctx)
	return r, storage.Err(op, "recipient", err)
}
