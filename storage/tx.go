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
	defer func() {
		// A panic in fn rolls the transaction back before it goes on up: left open, it would hold its
		// connection, and on SQLite the database's one write lock, for good.
		if v := recover(); v != nil {
			_ = tx.Rollback()
			panic(v)
		}
	}()
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

// AfterCommit runs fn once the transaction in ctx commits (and never if it rolls back); without a
// transaction in ctx it runs fn at once. Wake-ups and live events use it so nobody is told of a change that
// did not happen, or before it is visible.
func AfterCommit(ctx context.Context, fn func()) {
	tx := ent.TxFromContext(ctx)
	if tx == nil {
		fn()
		return
	}
	tx.OnCommit(func(next ent.Committer) ent.Committer {
		return ent.CommitFunc(func(ctx context.Context, tx *ent.Tx) error {
			if err := next.Commit(ctx, tx); err != nil {
				return err
			}
			fn()
			return nil
		})
	})
}
