package events

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"strings"
	"sync"
	"testing"

	_ "github.com/lib/pq"
	"github.com/stretchr/testify/require"
)

// testDSN returns the database the Postgres tests run against, or skips: they need a real server for
// LISTEN/NOTIFY, and CI provides one through ADAL_TEST_DATABASE_URL.
func testDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("ADAL_TEST_DATABASE_URL")
	if dsn == "" {
		t.Skip("Postgres bus tests need a database: set ADAL_TEST_DATABASE_URL, " +
			"e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	return dsn
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// randomTenant gives each test its own tenant IDs, so tests running in parallel, or other packages' tests on
// the same database, cannot satisfy each other's filters.
func randomTenant(t *testing.T) int {
	t.Helper()
	n, err := rand.Int(rand.Reader, big.NewInt(1<<40))
	require.NoError(t, err)
	return int(n.Int64()) + 1_000_000
}

// pgPair starts two buses on one database, as two server processes would, each with its own *sql.DB. They
// share a NOTIFY channel private to the test, so parallel tests do not see each other's traffic.
func pgPair(t *testing.T, opts ...Option) (a, b *Postgres, channel string) {
	t.Helper()
	dsn := testDSN(t)
	channel = "adal_events_test_" + randomHex(t)
	start := func(name string) *Postgres {
		db, err := sql.Open("postgres", dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		logger := slog.New(slog.NewTextHandler(testWriter{t}, nil)).With("bus", name)
		bus, err := NewPostgres(dsn, db, logger, append(opts, WithChannel(channel))...)
		require.NoError(t, err)
		require.NoError(t, bus.Start(t.Context()))
		t.Cleanup(bus.Stop) // runs before db.Close: cleanups run last-registered first
		return bus
	}
	return start("A"), start("B"), channel
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestPostgresEventCrossesProcesses(t *testing.T) {
	t.Parallel()
	a, b, _ := pgPair(t)
	tenant := randomTenant(t)

	onB := mustSubscribe(t, b, Filter{TenantID: tenant, ServerID: 2})
	onA := mustSubscribe(t, a, Filter{TenantID: tenant})

	e := Event{TenantID: tenant, ServerID: 2, RequestID: 3, DeliveryID: 4, Status: "SUCCEEDED", Kind: KindUpdated}
	require.NoError(t, a.Publish(t.Context(), e))
	require.Equal(t, e, recv(t, onB), "published on A, seen on B")
	require.Equal(t, e, recv(t, onA), "the publishing process's own subscribers get it too")

	// And the other way round.
	e2 := Event{TenantID: tenant, ServerID: 2, RequestID: 3, DeliveryID: 5, Status: "PENDING", Kind: KindCreated}
	require.NoError(t, b.Publish(t.Context(), e2))
	require.Equal(t, e2, recv(t, onA))
	require.Equal(t, e2, recv(t, onB))
}

func TestPostgresLargeBatchesArriveCompleteAndInOrder(t *testing.T) {
	t.Parallel()
	const n = 500
	// Room for everything: this test is about the NOTIFY path losing nothing, not about a slow reader.
	a, b, _ := pgPair(t, WithBuffer(2*n))
	tenant := randomTenant(t)

	sub := mustSubscribe(t, b, Filter{TenantID: tenant})

	// Both processes publish 500 events at once: each call needs several notifications, and each publisher's
	// events must arrive whole and in its order, however the two interleave.
	batch := func(server int) []Event {
		evs := make([]Event, n)
		for i := range evs {
			evs[i] = Event{TenantID: tenant, ServerID: server, RequestID: 7, DeliveryID: server*10_000 + i,
				Status: "IN_PROGRESS", Kind: KindAttempt}
		}
		return evs
	}
	fromA, fromB := batch(1), batch(2)
	payloads, err := encodeBatches(fromA, maxPayload)
	require.NoError(t, err)
	require.Greater(t, len(payloads), 3, "the test must exercise splitting into several notifications")

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, p := range []struct {
		bus *Postgres
		evs []Event
	}{{a, fromA}, {b, fromB}} {
		wg.Go(func() { errs <- p.bus.Publish(context.Background(), p.evs...) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	got := recvN(t, sub, 2*n)
	var gotA, gotB []Event
	for _, e := range got {
		require.NotEqual(t, KindOverflow, e.Kind)
		switch e.ServerID {
		case 1:
			gotA = append(gotA, e)
		case 2:
			gotB = append(gotB, e)
		}
	}
	require.Equal(t, fromA, gotA)
	require.Equal(t, fromB, gotB)
}

func TestPostgresTenantFilterKeepsOtherTenantsOut(t *testing.T) {
	t.Parallel()
	a, b, _ := pgPair(t)
	mine, theirs := randomTenant(t), randomTenant(t)
	require.NotEqual(t, mine, theirs)

	sub := mustSubscribe(t, b, Filter{TenantID: mine})
	operator := mustSubscribe(t, b, Filter{})

	var evs []Event
	for i := range 20 {
		tenant := theirs
		if i%5 == 0 {
			tenant = mine
		}
		evs = append(evs, Event{TenantID: tenant, ServerID: 1, RequestID: 1, DeliveryID: i, Kind: KindUpdated})
	}
	// A final event of ours, published after the others: events from one publisher arrive in order, so once it
	// is here anything of the other tenant's would have been here too. No sleeping to prove an absence.
	sentinel := Event{TenantID: mine, DeliveryID: 999, Kind: KindUpdated}
	require.NoError(t, a.Publish(t.Context(), evs...))
	require.NoError(t, a.Publish(t.Context(), sentinel))

	var got []Event
	for {
		e := recv(t, sub)
		require.Equal(t, mine, e.TenantID, "another tenant's event leaked: %+v", e)
		if e == sentinel {
			break
		}
		got = append(got, e)
	}
	require.Len(t, got, 4)

	// The operator's unfiltered subscription sees both tenants (and so proves the others were sent at all).
	all := recvN(t, operator, len(evs)+1)
	require.Equal(t, append(evs, sentinel), all)
}

func TestPostgresResyncAfterReconnect(t *testing.T) {
	t.Parallel()
	a, b, channel := pgPair(t)
	tenant := randomTenant(t)
	sub := mustSubscribe(t, b, Filter{TenantID: tenant, ServerID: 3})

	// Kill B's listener connection from the server side, as a database restart or failover would.
	killer, err := sql.Open("postgres", testDSN(t))
	require.NoError(t, err)
	defer killer.Close()
	var killed int
	err = killer.QueryRowContext(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query = $1 AND pid <> pg_backend_pid()`, fmt.Sprintf("LISTEN %q", channel)).Scan(&killed)
	require.NoError(t, err)
	require.Equal(t, 2, killed, "expected the listener connections of A and B")

	require.Equal(t, Event{TenantID: tenant, ServerID: 3, Kind: KindResync}, recv(t, sub),
		"after reconnecting, subscribers must be told to re-read what they may have missed")

	// And the bus works again.
	e := Event{TenantID: tenant, ServerID: 3, DeliveryID: 1, Kind: KindCreated}
	require.NoError(t, a.Publish(t.Context(), e))
	require.Equal(t, e, recv(t, sub))
}

func TestPostgresStopClosesSubscribers(t *testing.T) {
	t.Parallel()
	_, b, _ := pgPair(t)
	ch := mustSubscribe(t, b, Filter{TenantID: randomTenant(t)})
	b.Stop()
	requireClosed(t, ch)
	_, err := b.Subscribe(t.Context(), Filter{})
	require.ErrorIs(t, err, ErrNotRunning)

	// Restart: a new listener, and events flow again.
	require.NoError(t, b.Start(t.Context()))
	tenant := randomTenant(t)
	ch = mustSubscribe(t, b, Filter{TenantID: tenant})
	require.NoError(t, b.Publish(t.Context(), Event{TenantID: tenant, DeliveryID: 1}))
	require.Equal(t, 1, recv(t, ch).DeliveryID)

	// Ending the Start ctx stops the bus as Stop does.
	ctx, cancel := context.WithCancel(t.Context())
	b.Stop()
	require.NoError(t, b.Start(ctx))
	ch = mustSubscribe(t, b, Filter{})
	cancel()
	requireClosed(t, ch)
}

// unreachable returns a bus, and its handle, for a database at dsn that cannot be reached; both close when
// the test ends.
func unreachable(t *testing.T, dsn string) (*Postgres, *sql.DB) {
	t.Helper()
	db, err := sql.Open("postgres", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	bus, err := NewPostgres(dsn, db, nil)
	require.NoError(t, err)
	return bus, db
}

// TestPostgresStartFailsFast runs without a database: a process whose listener cannot connect at boot must
// say so instead of retrying in the background while serving subscriptions that will never receive anything.
func TestPostgresStartFailsFast(t *testing.T) {
	t.Parallel()
	bus, db := unreachable(t, "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=5")

	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	err := bus.Start(ctx)
	require.Error(t, err)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "must fail on the first attempt, not time out")
	_, err = bus.Subscribe(t.Context(), Filter{})
	require.ErrorIs(t, err, ErrNotRunning)
	bus.Stop() // harmless on a bus that never started

	_, err = NewPostgres("postgres://%zz", db, nil)
	require.Error(t, err, "a malformed DSN fails at construction")
	_, err = NewPostgres("postgres://postgres@127.0.0.1/x", nil, nil)
	require.Error(t, err)
}

func TestPostgresPublishRejectsOversizedEventBeforeSending(t *testing.T) {
	t.Parallel()
	bus, _ := unreachable(t, "postgres://postgres@127.0.0.1:1/none?sslmode=disable")
	// The database is unreachable: getting ErrEventTooLarge proves nothing was sent first.
	err := bus.Publish(t.Context(), Event{DeliveryID: 1}, Event{DeliveryID: 2, Status: strings.Repeat("x", 8000)})
	require.ErrorIs(t, err, ErrEventTooLarge)
}
