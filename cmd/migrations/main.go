// Command migrations writes the versioned migrations of a schema change: `migrations NAME` diffs the ent
// schema (as storage.Tables gives it, and storage.PostgresTables on PostgreSQL) against the replayed migrations/ directory of each dialect and writes
// the statements that close the gap as a new goose file in each; `migrations -check` fails when either
// directory would get one; `migrations -rehash` updates atlas.sum after a migration was edited by hand.
//
// The replay needs an empty database of each dialect: an in-memory SQLite, and a scratch schema on the
// PostgreSQL server named by -postgres (default $ADAL_TEST_DATABASE_URL), dropped afterwards.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	atlas "ariga.io/atlas/sql/migrate"
	_ "ariga.io/atlas/sql/postgres" // registers the postgres:// URLs of the replay
	"ariga.io/atlas/sql/sqltool"
	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/schema"
	_ "github.com/lib/pq"
	_ "modernc.org/sqlite"

	"github.com/adal-relay/adal/storage"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "migrations:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("migrations", flag.ContinueOnError)
	check := fs.Bool("check", false, "exit non-zero when the ent schema and the migrations disagree")
	rehash := fs.Bool("rehash", false, "rewrite atlas.sum of each dialect after a hand edit")
	dir := fs.String("dir", "migrations", "the migrations directory (one subdirectory per dialect)")
	pgURL := fs.String("postgres", os.Getenv("ADAL_TEST_DATABASE_URL"), "PostgreSQL server for the replay")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: migrations [-postgres URL] NAME | -check | -rehash")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	switch {
	case *rehash:
		for _, d := range storage.Dialects {
			if err := rehashDir(filepath.Join(*dir, storage.MigrationsDir(d))); err != nil {
				return err
			}
		}
		return nil
	case *check:
		var stale []string
		for _, d := range storage.Dialects {
			changed, err := checkDir(ctx, d, filepath.Join(*dir, storage.MigrationsDir(d)), *pgURL)
			if err != nil {
				return err
			}
			if changed {
				stale = append(stale, storage.MigrationsDir(d))
			}
		}
		if len(stale) > 0 {
			return fmt.Errorf("the ent schema differs from migrations/%v: run `go run ./cmd/migrations NAME`", stale)
		}
		return nil
	}
	if fs.NArg() != 1 || !regexp.MustCompile(`^[a-z0-9_]+$`).MatchString(fs.Arg(0)) {
		fs.Usage()
		return errors.New("give one migration NAME of lower-case letters, digits and _")
	}
	for _, d := range storage.Dialects {
		if err := diff(ctx, d, filepath.Join(*dir, storage.MigrationsDir(d)), fs.Arg(0), *pgURL); err != nil {
			return err
		}
	}
	return nil
}

// checkDir diffs into a copy of path and reports whether a migration would be written.
func checkDir(ctx context.Context, d, path, pgURL string) (bool, error) {
	tmp, err := os.MkdirTemp("", "adal-migrations-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, os.DirFS(path)); err != nil {
		return false, err
	}
	before, err := os.ReadDir(tmp)
	if err != nil {
		return false, err
	}
	if err := diff(ctx, d, tmp, "check", pgURL); err != nil {
		return false, err
	}
	after, err := os.ReadDir(tmp)
	return len(after) != len(before), err
}

// diffMu serialises diffs: ent's migrator annotates the table descriptions it is given, which share their
// columns and indexes with the generated ones.
var diffMu sync.Mutex

// diff writes the migration named name that brings the replayed directory path to the ent schema, if any.
func diff(ctx context.Context, d, path, name, pgURL string) error {
	diffMu.Lock()
	defer diffMu.Unlock()
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	dir, err := sqltool.NewGooseDir(path)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(path, atlas.HashFileName)); errors.Is(err, fs.ErrNotExist) {
		if err := rehashDir(path); err != nil { // a new, empty directory
			return err
		}
	}
	opts := []schema.MigrateOption{
		schema.WithDir(dir),
		schema.WithMigrationMode(schema.ModeReplay),
		schema.WithFormatter(sqltool.GooseFormatter),
		schema.WithDialect(d),
		schema.WithDropIndex(true),
		schema.WithDropColumn(true),
	}
	var m *schema.Atlas
	tables := storage.Tables()
	if d == dialect.SQLite {
		// The SQLite driver is modernc's, which Atlas cannot open from a URL: hand it the handle.
		dev, err := sql.Open("sqlite", "file::memory:?_pragma=foreign_keys(1)")
		if err != nil {
			return err
		}
		defer dev.Close()
		dev.SetMaxOpenConns(1) // one connection: each has a database of its own
		m, err = schema.NewMigrate(entsql.OpenDB(d, dev), opts...)
	} else {
		// From a URL, so that Atlas binds the replay to the scratch schema it names.
		devURL, cleanup, err := scratchSchema(ctx, pgURL)
		if err != nil {
			return err
		}
		defer cleanup()
		tables = storage.PostgresTables()
		m, err = schema.NewMigrateURL(devURL, append(opts, schema.WithDiffHook(storage.PostgresDiffHook))...)
	}
	if err != nil {
		return err
	}
	if err := m.NamedDiff(ctx, name, tables...); err != nil {
		return fmt.Errorf("%s: %w", d, err)
	}
	return nil
}

// scratchSchema creates an empty schema on the PostgreSQL server at pgURL and returns a URL bound to it and
// the function that drops it.
func scratchSchema(ctx context.Context, pgURL string) (string, func(), error) {
	if pgURL == "" {
		return "", nil, errors.New("the PostgreSQL replay needs a server: give -postgres URL or set ADAL_TEST_DATABASE_URL")
	}
	u, err := url.Parse(pgURL)
	if err != nil {
		return "", nil, err
	}
	admin, err := sql.Open("postgres", pgURL)
	if err != nil {
		return "", nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "adal_migrations_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create scratch schema: %w", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), func() {
		_, _ = admin.ExecContext(context.Background(), "DROP SCHEMA "+name+" CASCADE")
		admin.Close()
	}, nil
}

// rehashDir writes the atlas.sum of the directory at path.
func rehashDir(path string) error {
	dir, err := sqltool.NewGooseDir(path)
	if err != nil {
		return err
	}
	sum, err := dir.Checksum()
	if err != nil {
		return err
	}
	return atlas.WriteSumFile(dir, sum)
}
