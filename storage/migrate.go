package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"entgo.io/ent/dialect"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"

	"github.com/adal-relay/adal/migrations"
)

// versionTable is goose's record of the applied migrations.
const versionTable = "goose_db_version"

// ErrPending is returned by CheckMigrated when the database lacks migrations this build has.
var ErrPending = errors.New("the database has pending migrations: run `server migrate` (or start with ADAL_AUTO_MIGRATE=true)")

// Migrate applies the pending migrations of migrations/<dialect> and returns how many it applied. A database
// made by the automatic migration of earlier versions (tables, no version table) is first brought to the
// baseline and recorded as at it (upgradeLegacy). On PostgreSQL, processes migrating the same schema take
// turns.
func Migrate(ctx context.Context, db *DB) (int, error) {
	unlock, err := lockMigrations(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("migrate schema: %w", err)
	}
	defer unlock()
	legacy, err := isLegacy(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("migrate schema: %w", err)
	}
	p, err := provider(db)
	if err != nil {
		return 0, fmt.Errorf("migrate schema: %w", err)
	}
	if legacy {
		if err := upgradeLegacy(ctx, db, p); err != nil {
			return 0, fmt.Errorf("upgrade the schema of the automatic migration: %w", err)
		}
	}
	results, err := p.Up(ctx)
	if err != nil {
		return len(results), fmt.Errorf("migrate schema: %w", err)
	}
	// The history's day partitions from today through the horizon, so that intake writes into them from its
	// first request; the leader's purge keeps them ahead from then on (package retention).
	if db.Postgres() {
		now := time.Now()
		horizon, err := PartitionHorizon(ctx, db, now)
		if err == nil {
			_, err = EnsurePartitions(ctx, db, now, horizon)
		}
		if err != nil {
			return len(results), fmt.Errorf("migrate schema: %w", err)
		}
	}
	return len(results), nil
}

// CheckMigrated returns ErrPending when Migrate has work to do.
func CheckMigrated(ctx context.Context, db *DB) error {
	legacy, err := isLegacy(ctx, db)
	if err != nil {
		return err
	}
	if legacy {
		return ErrPending
	}
	p, err := provider(db)
	if err != nil {
		return err
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("read migration state: %w", err)
	}
	if pending {
		return ErrPending
	}
	return nil
}

// migrationFS returns the migrations of db's dialect.
func migrationFS(db *DB) (fs.FS, error) {
	return fs.Sub(migrations.FS, MigrationsDir(db.Dialect))
}

// provider returns goose's migrator for db. Locking is Migrate's (lockMigrations), which also covers the
// legacy upgrade.
func provider(db *DB) (*goose.Provider, error) {
	fsys, err := migrationFS(db)
	if err != nil {
		return nil, err
	}
	d := goose.DialectSQLite3
	if db.Postgres() {
		d = goose.DialectPostgres
	}
	return goose.NewProvider(d, db.SQL, fsys, goose.WithDisableGlobalRegistry(true),
		goose.WithTableName(versionTable))
}

// lockMigrations takes PostgreSQL's advisory lock of the current schema's migrations, on a connection of its
// own, and returns its release. Blocking, not polled: a process waits exactly as long as the one migrating.
// SQLite needs none: Adal's SQLite file belongs to one process.
func lockMigrations(ctx context.Context, db *DB) (func(), error) {
	if !db.Postgres() {
		return func() {}, nil
	}
	conn, err := db.SQL.Conn(ctx)
	if err != nil {
		return nil, err
	}
	const key = `hashtextextended('adal.migrate.' || current_schema(), 0)`
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(`+key+`)`); err != nil {
		conn.Close()
		return nil, fmt.Errorf("lock migrations: %w", err)
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock(`+key+`)`)
		conn.Close()
	}, nil
}

// isLegacy reports whether db holds Adal's tables but no record of migrations: a database of the automatic
// migration that versioned migrations replaced.
func isLegacy(ctx context.Context, db *DB) (bool, error) {
	tables, err := tableExists(ctx, db, "tenants")
	if err != nil || !tables {
		return false, err
	}
	versioned, err := tableExists(ctx, db, versionTable)
	return !versioned, err
}

func tableExists(ctx context.Context, db *DB, name string) (bool, error) {
	query := `SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?`
	if db.Dialect == dialect.Postgres {
		query = `SELECT to_regclass(quote_ident(current_schema()) || '.' || quote_ident($1)) IS NOT NULL`
	}
	var ok bool
	if err := db.SQL.QueryRowContext(ctx, query, name).Scan(&ok); err != nil {
		return false, fmt.Errorf("look for table %s: %w", name, err)
	}
	return ok, nil
}

// markApplied records version as applied without running it, creating goose's table first.
func markApplied(ctx context.Context, db *DB, version int64) error {
	d := database.DialectSQLite3
	if db.Postgres() {
		d = database.DialectPostgres
	}
	store, err := database.NewStore(d, versionTable)
	if err != nil {
		return err
	}
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := store.CreateVersionTable(ctx, tx); err != nil {
		return err
	}
	// goose's own start: version 0 marks an initialised table.
	for _, v := range []int64{0, version} {
		if err := store.Insert(ctx, tx, database.InsertRequest{Version: v}); err != nil {
			return err
		}
	}
	return tx.Commit()
}
