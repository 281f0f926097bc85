package retention_test

import (
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/retention"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
)

func days(n int) *int { return &n }

// expiryCases are a plan's and a server's retention, and the days a request accepted under them is kept.
var expiryCases = []struct {
	plan   int
	server *int
	want   int
}{
	{7, nil, 7},
	{7, days(3), 3},
	{7, days(7), 7},
	{3, days(30), 3},
	{1, days(1), 1},
	{3650, days(365), 365},
}

// TestExpiryConformance holds DaysSQL and ExpiresAtSQL, with which intake on PostgreSQL fixes a request's
// expiry, to Days and ExpiresAt. SQLite computes expiry in Go only, so there the cases check the Go form.
func TestExpiryConformance(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	received := time.Date(2026, 3, 28, 23, 30, 0, 250000000, time.UTC) // a day before a DST change in Europe
	query := "SELECT " + retention.ExpiresAtSQL("$1::timestamptz", retention.DaysSQL("$2::int", "$3::int"))
	for _, c := range expiryCases {
		require.Equal(t, c.want, retention.Days(c.plan, c.server), "plan %d, server %v", c.plan, c.server)
		want := retention.ExpiresAt(received, retention.Days(c.plan, c.server))
		require.Equal(t, received.Add(time.Duration(c.want)*24*time.Hour), want)
		if !db.Postgres() {
			continue
		}
		var server sql.NullInt64
		if c.server != nil {
			server = sql.NullInt64{Int64: int64(*c.server), Valid: true}
		}
		var got time.Time
		require.NoError(t, db.SQL.QueryRowContext(t.Context(), query, received, c.plan, server).Scan(&got))
		require.True(t, want.Equal(got), "plan %d, server %v: %s, want %s", c.plan, c.server, got, want)
	}
}

// TestExpiredConformance holds ExpiredSQL, with which the purge selects expired requests, and LiveSQL, with
// which the claims pass over them, to Expired, over stored expiry times around the moment asked about, on the
// database under test.
func TestExpiredConformance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Date(2026, 3, 14, 12, 0, 0, 250000000, time.UTC)
	want := map[int]bool{} // request id → expired
	for _, offset := range []time.Duration{-24 * time.Hour, -time.Second, -time.Microsecond, 0, time.Microsecond,
		250 * time.Millisecond, time.Second} {
		at := now.Add(offset)
		req := b.fx.requests(t, b.ctx, 1, at)[0]
		want[req.ID] = retention.Expired(at, now)
	}
	placeholder := "?"
	if b.db.Postgres() {
		placeholder = "$1"
	}
	selected := func(cond string) []int {
		rows, err := b.db.SQL.QueryContext(b.ctx, "SELECT id FROM requests WHERE "+cond, now)
		require.NoError(t, err)
		got, err := storage.ScanColumn[int](rows)
		require.NoError(t, err)
		slices.Sort(got)
		return got
	}
	var expired, live []int
	for id, e := range want {
		if e {
			expired = append(expired, id)
		} else {
			live = append(live, id)
		}
	}
	slices.Sort(expired)
	slices.Sort(live)
	require.Equal(t, expired, selected(retention.ExpiredSQL("expires_at", placeholder)))
	require.Equal(t, live, selected(retention.LiveSQL("expires_at", placeholder)))
	require.Len(t, expired, 4, "the cases reach both sides of the moment")
}
