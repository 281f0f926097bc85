package storage_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
)

// TestRegisteredStatementsArePreparedOncePerConnection: a statement registered with storage.Prepared is
// prepared by a connection the first time it runs there, then reused, in and out of transactions; its bytea
// and integer columns (which lib/pq then reads in binary) come back as sent; a statement not registered is
// never prepared.
func TestRegisteredStatementsArePreparedOncePerConnection(t *testing.T) {
	dbtest.SkipUnlessPostgres(t)
	db := dbtest.Open(t)
	ctx := context.Background()
	hot := storage.Prepared(`SELECT $1::bytea, $2::bigint, $3::text -- registered by the test`)
	cold := `SELECT $1::bytea, $2::bigint, $3::text -- not registered`

	conn, err := db.SQL.Conn(ctx) // one connection: prepared statements are per connection
	require.NoError(t, err)
	defer conn.Close()
	prepared := func(query string) int {
		t.Helper()
		var n int
		require.NoError(t, conn.QueryRowContext(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement = $1`, query).Scan(&n))
		return n
	}
	body := append(bytes.Repeat([]byte{0, 0xff, '\\', 'x'}, 300), "end"...)
	check := func(row interface{ Scan(...any) error }) {
		t.Helper()
		var (
			gotBody []byte
			gotN    int64
			gotS    string
		)
		require.NoError(t, row.Scan(&gotBody, &gotN, &gotS))
		require.Equal(t, body, gotBody)
		require.Equal(t, int64(-1<<40), gotN)
		require.Equal(t, "ünïcode", gotS)
	}

	for range 3 {
		check(conn.QueryRowContext(ctx, hot, body, int64(-1<<40), "ünïcode"))
		check(conn.QueryRowContext(ctx, cold, body, int64(-1<<40), "ünïcode"))
	}
	tx, err := conn.BeginTx(ctx, nil)
	require.NoError(t, err)
	check(tx.QueryRowContext(ctx, hot, body, int64(-1<<40), "ünïcode"))
	_, err = tx.ExecContext(ctx, hot, body, int64(-1<<40), "ünïcode")
	require.NoError(t, err)
	require.NoError(t, tx.Rollback()) // a protocol-level prepared statement outlives the transaction
	check(conn.QueryRowContext(ctx, hot, body, int64(-1<<40), "ünïcode"))

	require.Equal(t, 1, prepared(hot), "the registered statement, prepared once on this connection")
	require.Equal(t, 0, prepared(cold), "a statement that is not registered")
}

// TestPreparedStatementIsPreparedAgainWhenItsResultChanges: when another process changes the schema under a
// prepared statement so that its result columns change, PostgreSQL refuses to run it; it fails that once, and
// the next run prepares it anew instead of failing for the connection's lifetime.
func TestPreparedStatementIsPreparedAgainWhenItsResultChanges(t *testing.T) {
	dbtest.SkipUnlessPostgres(t)
	db := dbtest.Open(t)
	ctx := context.Background()
	_, err := db.SQL.ExecContext(ctx, `CREATE TABLE prepared_shape (a bigint); INSERT INTO prepared_shape VALUES (1)`)
	require.NoError(t, err)
	query := storage.Prepared(`SELECT * FROM prepared_shape -- registered by the test`)

	conn, err := db.SQL.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	columns := func() ([]string, error) {
		rows, err := conn.QueryContext(ctx, query)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return rows.Columns()
	}
	cols, err := columns()
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, cols)

	_, err = db.SQL.ExecContext(ctx, `ALTER TABLE prepared_shape ADD COLUMN b text`) // as another process would
	require.NoError(t, err)
	_, err = columns()
	require.ErrorContains(t, err, "cached plan must not change result type")
	cols, err = columns()
	require.NoError(t, err, "the statement prepared again")
	require.Equal(t, []string{"a", "b"}, cols)
}
