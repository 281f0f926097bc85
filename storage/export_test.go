package storage

import (
	"context"

	"entgo.io/ent/dialect/sql/schema"
)

// AutoMigrate creates or upgrades db's schema the way Adal did before versioned migrations: ent's automatic
// migration of Tables, dropping the indexes the schema no longer names, plus the hand-written upgrades. Tests
// use it to make the databases that Migrate must upgrade in place.
func AutoMigrate(ctx context.Context, db *DB) error {
	legacyMu.Lock()
	defer legacyMu.Unlock()
	if db.Postgres() {
		if err := headersToBytea(ctx, db.SQL); err != nil {
			return err
		}
	}
	withoutUnenforced := schema.WithHooks(func(next schema.Creator) schema.Creator {
		return schema.CreateFunc(func(ctx context.Context, _ ...*schema.Table) error {
			return next.Create(ctx, Tables()...)
		})
	})
	if err := db.Client.Schema.Create(ctx, withoutUnenforced, schema.WithDropIndex(true)); err != nil {
		return err
	}
	if db.Postgres() {
		return requestsFillFactor(ctx, db.SQL)
	}
	return nil
}

// CreateGenerated runs ent's automatic migration of the generated schema as it is, foreign keys and all: the
// schema versions before the unenforced foreign keys migrated to.
func CreateGenerated(ctx context.Context, db *DB) error {
	legacyMu.Lock()
	defer legacyMu.Unlock()
	return db.Client.Schema.Create(ctx)
}
