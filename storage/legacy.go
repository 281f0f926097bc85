package storage

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sync"

	atlasmigrate "ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/postgres"
	atlas "ariga.io/atlas/sql/schema"
	"ariga.io/atlas/sql/sqlite"
	"ariga.io/atlas/sql/sqltool"
	"entgo.io/ent/dialect/sql/schema"
	"github.com/pressly/goose/v3"
)

// legacyMu serialises legacy upgrades within a process: ent's migrator annotates the package-level table
// descriptions as it runs, so two at once (tests upgrading several databases) would race.
var legacyMu sync.Mutex

// upgradeLegacy brings a database of the automatic migration to the baseline migration's schema and records
// the baseline as applied; the later migrations then run as on any database. The target is the baseline
// replayed on a scratch database, not the ent schema, which moves on with later migrations. What the
// automatic migration of each earlier version left differs (jsonb headers, the history's foreign keys, full
// indexes since made partial, no fill factor), so the upgrade is a diff: ent's migrator plans and applies it
// as it did at every start before, adding and changing, dropping indexes and foreign keys, and never a column
// or a table.
func upgradeLegacy(ctx context.Context, db *DB, p *goose.Provider) error {
	legacyMu.Lock()
	defer legacyMu.Unlock()
	sources := p.ListSources()
	if len(sources) == 0 {
		return fmt.Errorf("no migrations")
	}
	base := sources[0]
	stmts, err := baselineStatements(db, base.Path)
	if err != nil {
		return err
	}
	if db.Postgres() {
		if err := headersToBytea(ctx, db.SQL); err != nil {
			return err
		}
	}
	want, err := baselineState(ctx, db, stmts)
	if err != nil {
		return err
	}
	toBaseline := schema.WithDiffHook(func(next schema.Differ) schema.Differ {
		return schema.DiffFunc(func(current, _ *atlas.Schema) ([]atlas.Change, error) {
			desired := &atlas.Schema{Name: current.Name, Attrs: current.Attrs, Realm: current.Realm}
			desired.AddTables(want.Tables...)
			return next.Diff(current, desired)
		})
	})
	if err := db.Client.Schema.Create(ctx, toBaseline, schema.WithDropIndex(true)); err != nil {
		return err
	}
	if db.Postgres() {
		if err := requestsFillFactor(ctx, db.SQL); err != nil {
			return err
		}
	}
	return markApplied(ctx, db, base.Version)
}

// baselineStatements reads the Up statements of the baseline migration at path.
func baselineStatements(db *DB, path string) ([]string, error) {
	fsys, err := migrationFS(db)
	if err != nil {
		return nil, err
	}
	data, err := fs.ReadFile(fsys, path)
	if err != nil {
		return nil, err
	}
	f := &sqltool.GooseFile{LocalFile: atlasmigrate.NewLocalFile(path, data)}
	return f.Stmts()
}

// baselineState runs the baseline statements on a scratch database of db's dialect and inspects the result:
// an in-memory SQLite, or on PostgreSQL a schema created in a transaction that is rolled back.
func baselineState(ctx context.Context, db *DB, stmts []string) (*atlas.Schema, error) {
	if !db.Postgres() {
		scratch, err := sql.Open("sqlite", "file::memory:?_pragma=foreign_keys(1)")
		if err != nil {
			return nil, err
		}
		defer scratch.Close()
		scratch.SetMaxOpenConns(1) // one connection: each has a database of its own
		return replayBaseline(ctx, scratch, stmts, sqlite.Open, "main")
	}
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "adal_baseline_" + hex.EncodeToString(b[:])
	if _, err := tx.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
		return nil, fmt.Errorf("create scratch schema: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "SET LOCAL search_path TO "+name); err != nil {
		return nil, err
	}
	return replayBaseline(ctx, tx, stmts, postgres.Open, name)
}

// replayBaseline runs the baseline statements on db, then inspects the schema named name that they built,
// through the dialect's driver that open returns.
func replayBaseline(ctx context.Context, db atlas.ExecQuerier, stmts []string, open func(atlas.ExecQuerier) (atlasmigrate.Driver, error), name string) (*atlas.Schema, error) {
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("replay baseline: %w", err)
		}
	}
	drv, err := open(db)
	if err != nil {
		return nil, err
	}
	return drv.InspectSchema(ctx, name, nil)
}

// requestsFillFactor sets RequestsFillFactor on the requests table unless it is set already (ALTER TABLE
// takes a lock, if a light one).
func requestsFillFactor(ctx context.Context, db *sql.DB) error {
	want := fmt.Sprintf("fillfactor=%d", RequestsFillFactor)
	var set bool
	err := db.QueryRowContext(ctx, `SELECT COALESCE($1 = ANY(reloptions), false) FROM pg_class
		WHERE oid = to_regclass(quote_ident(current_schema()) || '.requests')`, want).Scan(&set)
	if err != nil {
		return fmt.Errorf("read requests fill factor: %w", err)
	}
	if set {
		return nil
	}
	if _, err := db.ExecContext(ctx, `ALTER TABLE requests SET (`+want+`)`); err != nil {
		return fmt.Errorf("set requests fill factor: %w", err)
	}
	return nil
}

// headersToBytea converts the header columns of a database created while they were jsonb to bytea (see
// headersField in ent/schema), a conversion the automatic migration cannot make by itself: the JSON text is
// kept, as bytes.
func headersToBytea(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT table_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name IN ('requests', 'outbound_jobs')
			AND column_name = 'headers' AND data_type = 'jsonb'`)
	if err != nil {
		return fmt.Errorf("find jsonb headers: %w", err)
	}
	tables, err := ScanColumn[string](rows)
	if err != nil {
		return err
	}
	for _, t := range tables { // a name from the fixed list above
		alter := `ALTER TABLE ` + t + ` ALTER COLUMN headers TYPE bytea USING convert_to(headers::text, 'UTF8')`
		if _, err := db.ExecContext(ctx, alter); err != nil {
			return fmt.Errorf("convert %s.headers to bytea: %w", t, err)
		}
	}
	return nil
}
