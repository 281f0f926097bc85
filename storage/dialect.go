package storage

import (
	"regexp"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
)

// PerDialect is something a domain package has one of per dialect: its statements, a setting, a behaviour.
// The package declares both once, in a file per dialect, and takes its own with For — at construction, or at
// the top of a function handed the database — so that storage stays the only package that knows which
// database it runs on.
type PerDialect[T any] struct {
	Postgres T
	SQLite   T
}

// For returns the value of db's dialect.
func (p PerDialect[T]) For(db *DB) T { return p.Of(db.Dialect) }

// Of returns the value of the dialect named d (DB.Dialect), for a package configured with the name alone;
// an empty name is SQLite, the embedded default.
func (p PerDialect[T]) Of(d string) T {
	if d == dialect.Postgres {
		return p.Postgres
	}
	return p.SQLite
}

// Writers returns how many of n concurrent writers db can use: n on PostgreSQL, one on SQLite, whose single
// write lock would only queue the others behind it.
func (db *DB) Writers(n int) int {
	if db.Postgres() {
		return n
	}
	return min(n, 1)
}

var numberedParam = regexp.MustCompile(`\$([0-9])`)

// Numbered is a statement that reads the same in both dialects but for its parameters, written as
// PostgreSQL's $1, $2…: SQLite takes the same numbers as ?1, ?2…. Build it once (a package variable), not per
// call.
func Numbered(query string) PerDialect[string] {
	return PerDialect[string]{Postgres: query, SQLite: numberedParam.ReplaceAllString(query, "?$1")}
}

// RowLocks are the locks a transaction takes on the rows a query reads, to keep them until it commits, as ent
// query modifiers (Query.Modify). PostgreSQL locks rows; SQLite's transactions hold the database's one write
// lock from BEGIN, so there each is a modifier that does nothing.
type RowLocks struct {
	Share, KeyShare, NoKeyUpdate func(*entsql.Selector)
}

var rowLocks = PerDialect[RowLocks]{
	Postgres: RowLocks{
		Share:       func(s *entsql.Selector) { s.For(entsql.LockShare) },
		KeyShare:    func(s *entsql.Selector) { s.For(entsql.LockKeyShare) },
		NoKeyUpdate: func(s *entsql.Selector) { s.For(entsql.LockNoKeyUpdate) },
	},
	SQLite: RowLocks{Share: noLock, KeyShare: noLock, NoKeyUpdate: noLock},
}

func noLock(*entsql.Selector) {}

// RowLocksOf returns the row locks of the dialect named d (DB.Dialect).
func RowLocksOf(d string) RowLocks { return rowLocks.Of(d) }
