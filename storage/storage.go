// Package storage opens Adal's database — embedded SQLite by default, PostgreSQL when a URL is given — and
// brings its schema up to date.
package storage

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"entgo.io/ent/dialect/sql/schema"
	"github.com/lib/pq"
	_ "modernc.org/sqlite" // pure-Go SQLite driver, registered as "sqlite": go run needs no C toolchain.

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/migrate"
	_ "github.com/adal-relay/adal/ent/runtime" // privacy policies and hooks of the schema.
)

// DB is an open database: the ent client, the raw handle for the few statements ent cannot express, and which
// dialect it speaks.
type DB struct {
	Client  *ent.Client
	SQL     *sql.DB
	Dialect string // dialect.SQLite or dialect.Postgres
}

// Postgres reports whether the database is PostgreSQL (the scale-out configuration).
func (db *DB) Postgres() bool { return db.Dialect == dialect.Postgres }

// Close closes the client and the handle.
func (db *DB) Close() error { return db.Client.Close() }

// Open connects to databaseURL when it is a postgres:// URL, otherwise to SQLite in dataDir/adal.db, and
// applies the pending migrations (Migrate).
func Open(ctx context.Context, databaseURL, dataDir string) (*DB, error) {
	db, err := Connect(databaseURL, dataDir)
	if err != nil {
		return nil, err
	}
	if _, err := Migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Connect opens the database as Open does, without migrating it.
func Connect(databaseURL, dataDir string) (*DB, error) {
	if databaseURL != "" {
		return openPostgres(databaseURL)
	}
	return openSQLite(dataDir)
}

// unenforcedForeignKeys are the links of the request history that the database does not check. The history
// is the bulk of every write (intake, attempts, the ledger) and of every purge, and a foreign key costs the
// database one lookup per row on both: an index lookup and a KEY SHARE lock on the parent for each inserted
// child, and a scan of the children for each deleted parent: most of a purge's time, and a large share of
// intake's and delivery's. The application keeps the same guarantees itself, at one statement per batch
// instead of one lookup per row:
//   - attempts → deliveries: an attempt is only inserted by the statement that moves its delivery out of its
//     claim (delivery.Service.record, recordBatchSQL), so a delivery that is gone gets none; the purge deletes
//     a delivery's attempts with it, in the same transaction.
//   - deliveries → requests: deliveries are created with their request (intake, replay), or by a retry that
//     first holds the request with the lock the foreign key used to take (delivery.Service.holdRequest); the
//     purge, which locks what it deletes and skips what others hold, deletes them with their request.
//   - requests.replay_of → requests (was ON DELETE SET NULL): the purge clears the replays' link itself, and a
//     replay holds its original while it is stored. A link left to a purged request reads as none (the
//     replayOf resolver masks not-found); ids are never reused, so it can never name another request.
//   - requests, deliveries, attempts and ledger entries → their tenant, requests → server, deliveries →
//     recipient: tenants, servers and recipients are never deleted (a deleted server or recipient is marked,
//     and keeps its row for the history that names it), and each child takes its parents' ids from rows read
//     in its own transaction: intake's statement holds the server FOR SHARE, live, and checks the tenant
//     against it (its recipients, read just before, are never deleted either); ledger entries are written by
//     billing under the lock of their tenant's row; an attempt takes its tenant from its delivery.
//
// The migrations leave them out (Tables), and the upgrade of a database made before them drops them.
var unenforcedForeignKeys = map[string]bool{
	"attempts_deliveries_attempts":     true,
	"deliveries_requests_deliveries":   true,
	"requests_requests_replays":        true,
	"attempts_tenants_tenant":          true,
	"deliveries_tenants_tenant":        true,
	"deliveries_recipients_deliveries": true,
	"ledger_entries_tenants_tenant":    true,
	"requests_tenants_tenant":          true,
	"requests_servers_requests":        true,
}

// Tables returns the schema's tables as the database holds them: the generated tables without the
// unenforced foreign keys. The tables are copies; the generated ones are package state and stay as generated.
func Tables() []*schema.Table {
	tables := make([]*schema.Table, len(migrate.Tables))
	for i, t := range migrate.Tables {
		c := *t
		c.ForeignKeys = slices.DeleteFunc(slices.Clone(t.ForeignKeys), func(fk *schema.ForeignKey) bool {
			return unenforcedForeignKeys[fk.Symbol]
		})
		tables[i] = &c
	}
	return tables
}

// RequestsFillFactor is the fill factor of the requests table on PostgreSQL. A request row is written once at
// intake and updated once more when its deliveries settle (its status). On a full page that update moves the
// row, writes all of it to the WAL again and gives every index an entry for the new version; with room left
// on the page it is a HOT update in place. Rows of one page are stored and updated within milliseconds of each
// other, before their old versions can be reclaimed, so the room must be there for each: pages filled to
// half. The price is space for rows whose body is stored inline. Each partition of the table has it (a
// partitioned table has no storage of its own): the migrations set it on the default partition,
// EnsurePartitions on each day's.
const RequestsFillFactor = 50

// WrapPostgresConnector, when set before Open, wraps the connector of every PostgreSQL database Open opens. It
// is a measuring hook — cmd/bench counts the SQL statements a process sends through it — and nil otherwise.
var WrapPostgresConnector func(driver.Connector) driver.Connector

func openPostgres(databaseURL string) (*DB, error) {
	u, err := url.Parse(databaseURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("ADAL_DATABASE_URL must be a postgres:// URL")
	}
	// Parameters in binary form: lib/pq then sends a statement with parameters in one round trip (Parse, Bind,
	// Execute together) instead of two (Parse and Describe first, to learn the parameter types). Half the round
	// trips of every statement is a shorter intake transaction, a quicker claim and a quicker answer. Only
	// []byte parameters travel in binary, so the columns that take them are bytea (bodies, and headers: see
	// headersField in ent/schema). A URL that sets binary_parameters itself has the last word.
	q := u.Query()
	if !q.Has("binary_parameters") {
		q.Set("binary_parameters", "yes")
	}
	// No JIT compilation: every statement Adal sends is short, and a plan whose estimated cost passes
	// jit_above_cost — the claim's, planned for a large backlog it never walks — spent far longer compiling
	// than running. Also the last word of a URL that sets it.
	if !q.Has("jit") {
		q.Set("jit", "off")
	}
	u.RawQuery = q.Encode()
	// The same connections sql.Open("postgres", …) makes, built from lib/pq's connector so it can be wrapped.
	var connector driver.Connector
	if connector, err = pq.NewConnector(u.String()); err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	connector = preparingConnector{connector}
	if WrapPostgresConnector != nil {
		connector = WrapPostgresConnector(connector)
	}
	sqlDB := sql.OpenDB(connector)
	sqlDB.SetMaxOpenConns(32)
	sqlDB.SetMaxIdleConns(32)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	drv := entsql.OpenDB(dialect.Postgres, sqlDB)
	return &DB{Client: ent.NewClient(ent.Driver(drv)), SQL: sqlDB, Dialect: dialect.Postgres}, nil
}

func openSQLite(dataDir string) (*DB, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	return OpenSQLiteFile(filepath.Join(dataDir, "adal.db"))
}

// OpenSQLiteFile opens (without migrating) the SQLite database at path.
func OpenSQLiteFile(path string) (*DB, error) {
	dsn := "file:" + strings.ReplaceAll(path, "?", "%3F") +
		"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_txlock=immediate"
	sqlDB, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	// SQLite has one writer; a small pool keeps writers queueing on busy_timeout instead of failing, while WAL
	// lets readers proceed.
	sqlDB.SetMaxOpenConns(4)
	drv := entsql.OpenDB(dialect.SQLite, sqlDB)
	return &DB{Client: ent.NewClient(ent.Driver(drv)), SQL: sqlDB, Dialect: dialect.SQLite}, nil
}

// Dialects are the dialects Adal runs on, each with its directory of migrations (MigrationsDir).
var Dialects = []string{dialect.Postgres, dialect.SQLite}

// MigrationsDir is the directory under migrations/ that holds the migrations of dialect d.
func MigrationsDir(d string) string {
	if d == dialect.SQLite {
		return "sqlite"
	}
	return d
}

// Now is the clock the services take when given none: UTC throughout, since SQLite compares stored times as
// text, which is only correct within one zone.
func Now() time.Time { return time.Now().UTC() }

// NewLeaseOwner returns a random name for a process to take leases on rows under (their lease_owner column).
func NewLeaseOwner() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
