package retention_test

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/bench"
	"github.com/adal-relay/adal/retention"
	"github.com/adal-relay/adal/storage/dbtest"
)

// BenchmarkPurge measures the purge of ADAL_BENCH_PURGE_REQUESTS (default 100,000) expired requests, each with
// two deliveries of three attempts, on PostgreSQL, while a probe keeps accepting requests to show whether the
// purge stalls intake. Run it with -benchtime=1x: each iteration refills the tables.
//
//	ADAL_TEST_DATABASE_URL=postgres://… go test ./retention -run '^$' -bench Purge -benchtime=1x -v
//
// ADAL_BENCH_PURGE_WORKERS sets Config.Workers (default 2).
func BenchmarkPurge(b *testing.B) {
	dbtest.SkipUnlessPostgres(b)
	n := 100_000
	if v := os.Getenv("ADAL_BENCH_PURGE_REQUESTS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	tb := setup(b)
	p := tb.purger(b, func(c *retention.Config) {
		if v := os.Getenv("ADAL_BENCH_PURGE_WORKERS"); v != "" {
			var err error
			c.Workers, err = strconv.Atoi(v)
			require.NoError(b, err)
		}
	})
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		fill(b, tb, n, i)
		// The same probe without a purge first: the baseline the figures during the purge compare to.
		baseline := startIntakeProbe(b, tb)
		time.Sleep(3 * time.Second)
		base := baseline.stop()
		probe := startIntakeProbe(b, tb)
		b.StartTimer()

		st, err := p.PurgeOnce(context.Background())

		b.StopTimer()
		lat := probe.stop()
		require.NoError(b, err)
		require.Equal(b, int64(n), st.Requests)
		require.Equal(b, int64(2*n), st.Deliveries)
		require.Equal(b, int64(6*n), st.Attempts)

		b.ReportMetric(st.RequestsPerSecond(), "requests/s")
		b.ReportMetric(st.RowsPerSecond(), "rows/s")
		b.ReportMetric(float64(st.LongestBatch.Microseconds())/1000, "longest-batch-ms")
		b.ReportMetric(float64(st.Batches), "batches")
		b.ReportMetric(float64(bench.Percentile(lat, 0.99).Microseconds())/1000, "intake-p99-ms")
		b.ReportMetric(float64(bench.Percentile(lat, 1).Microseconds())/1000, "intake-max-ms")
		b.ReportMetric(float64(bench.Percentile(base, 0.99).Microseconds())/1000, "intake-idle-p99-ms")
		b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MiB")
		b.Logf("purged %d requests, %d deliveries, %d attempts in %v: %.0f requests/s, %.0f rows/s; "+
			"%d batches, longest %v; intake during purge: %d requests, p99 %v, max %v (without purge: p99 %v, max %v)",
			st.Requests, st.Deliveries, st.Attempts, st.Elapsed.Round(time.Millisecond), st.RequestsPerSecond(),
			st.RowsPerSecond(), st.Batches, st.LongestBatch.Round(time.Microsecond), len(lat),
			bench.Percentile(lat, 0.99), bench.Percentile(lat, 1), bench.Percentile(base, 0.99), bench.Percentile(base, 1))
	}
}

// fill inserts n expired requests with their history server-side (INSERT … SELECT), then refreshes the planner's
// statistics as autovacuum would have done on a live database.
func fill(b testing.TB, tb *testBundle, n, round int) {
	b.Helper()
	start := time.Now()
	fx, db := tb.fx, tb.db.SQL
	now := tb.clock.Now()
	_, err := db.Exec(`
		INSERT INTO requests (key, method, path, query, headers, body, source_addr, received_at, expires_at,
		                      status, tenant_id, server_id)
		SELECT 'bench-' || $1::text || '-' || g, 'POST', '/events', '', '{"Content-Type":["application/json"]}',
		       convert_to(repeat('{"id":"evt"}', 80), 'UTF8'), '127.0.0.1:4242',
		       $2::timestamptz - interval '7 days', $2::timestamptz - (g || ' milliseconds')::interval,
		       'FAILED', $3, $4
		FROM generate_series(1, $5) AS g`,
		strconv.Itoa(round), now, fx.tenantID, fx.serverID, n)
	require.NoError(b, err)
	_, err = db.Exec(`
		INSERT INTO deliveries (created_at, status, trigger, attempt_count, max_attempts, retry_schedule,
		                        lease_owner, backlog, superseded, finished_at, tenant_id, recipient_id, request_id,
		                        expires_at)
		SELECT r.received_at, 'FAILED', 'AUTOMATIC', 3, 3, 'QUADRATIC', '', false, false, r.received_at,
		       r.tenant_id, rc.id, r.id, r.expires_at
		FROM requests r CROSS JOIN (VALUES ($1::bigint), ($2::bigint)) AS rc(id)
		WHERE r.expires_at <= $3`,
		fx.recipients[0], fx.recipients[1], now)
	require.NoError(b, err)
	// The attempts go to the deliveries just made (FAILED) only: the probes' deliveries of earlier rounds
	// (PENDING, not expired) outlive each purge, and would get their numbers twice.
	_, err = db.Exec(`
		INSERT INTO attempts (number, started_at, finished_at, status, http_status, duration_ms, error_kind,
		                      error_message, tenant_id, delivery_id, expires_at)
		SELECT g, d.created_at, d.created_at, 'FAILED', 500, 12, 'HTTP_STATUS', 'HTTP 500', d.tenant_id, d.id,
		       d.expires_at
		FROM deliveries d CROSS JOIN generate_series(1, 3) AS g
		WHERE d.status = 'FAILED'`)
	require.NoError(b, err)
	_, err = db.Exec(`ANALYZE requests, deliveries, attempts`)
	require.NoError(b, err)
	b.Logf("filled %d requests with history in %v", n, time.Since(start).Round(time.Millisecond))
}

// intakeProbe accepts requests one transaction at a time, the way inbound does (a request and its deliveries),
// and records how long each took.
type intakeProbe struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	lat    []time.Duration
	err    error
}

func startIntakeProbe(b *testing.B, tb *testBundle) *intakeProbe {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &intakeProbe{cancel: cancel}
	fx, db := tb.fx, tb.db.SQL
	expires := tb.clock.Now().Add(24 * time.Hour)
	p.wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			start := time.Now()
			if err := accept(ctx, db, fx, expires, i); err != nil {
				if ctx.Err() == nil {
					p.err = err
				}
				return
			}
			p.lat = append(p.lat, time.Since(start))
			time.Sleep(time.Millisecond) // a steady trickle, not a load test
		}
	})
	return p
}

func (p *intakeProbe) stop() []time.Duration {
	p.cancel()
	p.wg.Wait()
	if p.err != nil {
		panic(p.err)
	}
	return p.lat
}

func accept(ctx context.Context, db *sql.DB, fx *fixture, expires time.Time, i int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var id int64
	err = tx.QueryRowContext(ctx, `
		INSERT INTO requests (key, method, path, query, headers, body, source_addr, received_at, expires_at,
		                      status, tenant_id, server_id)
		VALUES ($1, 'POST', '', '', '{}', '\x7b7d', '', now(), $2, 'PENDING', $3, $4) RETURNING id`,
		"probe-"+randomHex(8)+strconv.Itoa(i), expires, fx.tenantID, fx.serverID).Scan(&id)
	if err != nil {
		return err
	}
	for _, rcp := range fx.recipients {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO deliveries (created_at, status, trigger, attempt_count, max_attempts, retry_schedule,
			                        lease_owner, backlog, superseded, tenant_id, recipient_id, request_id, expires_at)
			VALUES (now(), 'PENDING', 'AUTOMATIC', 0, 10, 'QUADRATIC', '', false, false, $1, $2, $3, $4)`,
			fx.tenantID, rcp, id, expires); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// peakRSS is the process's maximum resident set size in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}

// TestBenchFixtureIsPurgeable keeps the benchmark's hand-written inserts in step with the schema: a tiny fill,
// purged, on every Postgres test run.
func TestBenchFixtureIsPurgeable(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t)
	tb := setup(t)
	fill(t, tb, 5, 0)
	st, err := tb.purger(t).PurgeOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(5), st.Requests)
	require.Equal(t, int64(10), st.Deliveries)
	require.Equal(t, int64(30), st.Attempts)
}
