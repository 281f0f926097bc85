package storage

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strings"

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

// DownToBaseline takes out of a schema that AutoMigrate or CreateGenerated made from today's ent schema what
// the migrations after the baseline added, by running their Down sections newest first: the automatic
// migration that Migrate upgrades from was replaced at the baseline and never made those. Tests write their
// rows first, with today's ent client, then call it.
func DownToBaseline(ctx context.Context, db *DB) error {
	fsys, err := migrationFS(db)
	if err != nil {
		return err
	}
	files, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return err
	}
	slices.Sort(files)
	for _, name := range slices.Backward(files[1:]) {
		text, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		_, down, ok := strings.Cut(string(text), "-- +goose Down\n")
		if !ok {
			return fmt.Errorf("%s: no Down section", name)
		}
		for _, stmt := range strings.Split(down, ";\n") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := db.SQL.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("%s: down: %w", name, err)
			}
		}
	}
	return nil
}

// MigrateUpTo applies the migrations up to and including version, as a database of that version had them.
func MigrateUpTo(ctx context.Context, db *DB, version int64) error {
	p, err := provider(db)
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}
