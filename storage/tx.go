package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/privacy"
	"github.com/adal-relay/adal/fault"
)

// InTx runs fn in a transaction on client and commits if fn returns nil. When ctx already carries a
// transaction (a GraphQL mutation runs in one, see entgql.Transactioner), fn joins it instead, so a domain
// operation is all-or-nothing with whatever the caller does around it.
func InTx(ctx context.Context, client *ent.Client, fn func(ctx context.Context, tx *ent.Client) error) error {
	if tx := ent.TxFromContext(ctx); tx != nil {
		return fn(ctx, tx.Client())
	}
	tx, err := client.Tx(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	txCtx := ent.NewTxContext(ctx, tx)
	if err := fn(txCtx, tx.Client()); err != nil {
		if rerr := tx.Rollback(); rerr != nil {
			return fmt.Errorf("%w (rollback: %v)", err, rerr)
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Err maps ent's errors to kinds a client can act on; what names the entity for the message.
func Err(op, what string, err error) error {
	switch {
	case err == nil:
		return nil
	case ent.IsNotFound(err):
		return fault.E(op, fault.NotFound, "%s not found", what)
	case ent.IsConstraintError(err):
		return fault.E(op, fault.Conflict, "%s conflicts with an existing one", what)
	case errors.Is(err, privacy.Deny):
		return fault.E(op, fault.Forbidden, "not allowed to access this %s", what)
	case ent.IsValidationError(err):
		return fault.E(op, fault.InvalidInput, "%s: %v", what, errors.Unwrap(err))
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err
	}
	return fault.Wrap(op, fault.Internal, err)
}
