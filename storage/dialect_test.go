package storage_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	entsql "entgo.io/ent/dialect/sql"
	"github.com/lib/pq"
	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
)

// The seam's behaviours, run on the database under test (SQLite, or PostgreSQL with dbtest.EnvURL): each case
// holds for both dialects, so a domain package that takes its statements and locks through storage gets the
// same results on either.

// TestPerDialectRunsTheDatabasesStatement: For hands out the statement written for the database it is given.
func TestPerDialectRunsTheDatabasesStatement(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	echo := storage.PerDialect[string]{Postgres: `SELECT $1::bigint`, SQLite: `SELECT ?1`}
	var got int64
	require.NoError(t, db.SQL.QueryRowContext(t.Context(), echo.For(db.DB), 42).Scan(&got))
	require.Equal(t, int64(42), got)
	require.Equal(t, echo.For(db.DB), echo.Of(db.Dialect))
}

// TestNumberedStatementBindsByNumber: a Numbered statement binds its parameters by number on both dialects, a
// number used twice taking the same argument.
func TestNumberedStatementBindsByNumber(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	a, b := plan(ctx, t, db), plan(ctx, t, db)
	q := storage.Numbered(`SELECT COUNT(*) FROM plans WHERE (id = $1 OR id = $2) AND id <> $3 AND $2 > 0`)
	for _, c := range []struct {
		args []any
		want int
	}{
		{[]any{a.ID, b.ID, 0}, 2},
		{[]any{a.ID, b.ID, a.ID}, 1},
		{[]any{a.ID, -1, 0}, 0}, // $2 is used twice: its second use drops every row
	} {
		var n int
		require.NoError(t, db.SQL.QueryRowContext(ctx, q.For(db.DB), c.args...).Scan(&n))
		require.Equal(t, c.want, n, "args %v", c.args)
	}
}

// TestRowLocksReadAndHold: each row lock reads the rows as an unlocked query does, and, where the database
// locks rows, holds them against another transaction's FOR UPDATE until commit.
func TestRowLocksReadAndHold(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	p := plan(ctx, t, db)
	locks := storage.RowLocksOf(db.Dialect)
	for name, lock := range map[string]func(*entsql.Selector){"share": locks.Share, "key share": locks.KeyShare, "no key update": locks.NoKeyUpdate} {
		err := storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
			q := tx.Plan.Query().Where(func(s *entsql.Selector) { s.Where(entsql.EQ(s.C("id"), p.ID)) })
			q.Modify(lock)
			ids, err := q.IDs(ctx)
			if err != nil {
				return err
			}
			require.Equal(t, []int{p.ID}, ids, name)
			if !dbtest.Postgres() {
				return nil // SQLite: the transaction holds the database's write lock from BEGIN
			}
			_, err = db.SQL.ExecContext(ctx, `SELECT id FROM plans WHERE id = $1 FOR UPDATE NOWAIT`, p.ID)
			var pe *pq.Error
			require.True(t, errors.As(err, &pe) && pe.Code == "55P03", "%s: the row is held, got %v", name, err)
			return nil
		})
		require.NoError(t, err, name)
	}
}

// TestWritersCapsAtTheDatabasesWriters: PostgreSQL takes as many writers as asked; SQLite one.
func TestWritersCapsAtTheDatabasesWriters(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	want := storage.PerDialect[int]{Postgres: 3, SQLite: 1}.For(db.DB)
	require.Equal(t, want, db.Writers(3))
	require.Equal(t, 1, db.Writers(1))
}

var plans atomic.Int64

func plan(ctx context.Context, t *testing.T, db *dbtest.DB) *ent.Plan {
	t.Helper()
	p, err := db.Client.Plan.Create().SetName(fmt.Sprintf("p-%d", plans.Add(1))).SetMonthlyCredits(1).SetRetentionDays(1).
		SetMaxServers(1).SetMaxRecipientsPerServer(1).Save(ctx)
	require.NoError(t, err)
	return p
}

// TestInTxRollsBackOnPanic: a transaction whose work panics is rolled back as the panic goes on up, so what it
// wrote is gone and its connection — on SQLite the database's one write lock — is free for the next.
func TestInTxRollsBackOnPanic(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	require.PanicsWithValue(t, "bug", func() {
		_ = storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
			_, err := tx.Plan.Create().SetName("doomed").SetMonthlyCredits(0).SetRetentionDays(7).
				SetMaxServers(1).SetMaxRecipientsPerServer(1).Save(ctx)
			require.NoError(t, err)
			panic("bug")
		})
	})
	n, err := db.Client.Plan.Query().Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "the panicked transaction's write was rolled back")
	p := plan(ctx, t, db) // writes again: nothing holds the database
	require.NotZero(t, p.ID)
}

func TestNullTimeReadsWhatSQLiteHandsBack(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 11, 30, 5, 4, 3, 120000000, time.UTC)
	for _, src := range []any{
		want,
		want.String(),
		want.String() + " m=+12.345678901",
		"2026-11-30 05:04:03.12+00:00",
		[]byte("2026-11-30T05:04:03.12Z"),
	} {
		var v storage.NullTime
		require.NoError(t, v.Scan(src), "%v", src)
		require.True(t, v.Valid)
		require.True(t, want.Equal(v.Time), "%v parsed as %v", src, v.Time)
	}
	var v storage.NullTime
	require.NoError(t, v.Scan(nil))
	require.False(t, v.Valid)
	require.Error(t, v.Scan("yesterday"))
}
