package inbound

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBucketRefillsAtItsRate(t *testing.T) {
	t.Parallel()
	var b bucket
	now := time.Unix(1_700_000_000, 0)
	for range 2 {
		ok, _ := b.take(now, 2)
		require.True(t, ok, "a full bucket holds one second's worth")
	}
	ok, wait := b.take(now, 2)
	require.False(t, ok)
	require.Equal(t, 500*time.Millisecond, wait)
	require.Equal(t, 1, retryAfterSeconds(wait), "Retry-After is whole seconds, at least one")
	ok, _ = b.take(now.Add(500*time.Millisecond), 2)
	require.True(t, ok)

	b.giveBack()
	ok, _ = b.take(now.Add(500*time.Millisecond), 2)
	require.True(t, ok, "a token given back can be taken again")
	ok, wait = b.take(now.Add(500*time.Millisecond), 1)
	require.False(t, ok, "a lowered rate applies at once")
	require.Equal(t, time.Second, wait)
}

func TestBodyBudget(t *testing.T) {
	t.Parallel()
	b := bodyBudget{limit: 10}
	require.True(t, b.reserve(6))
	require.False(t, b.reserve(5))
	require.True(t, b.reserve(4))
	b.release(6)
	require.True(t, b.reserve(5))
}

// BenchmarkLimiterHit is what intake adds to a request for a known key with both rates set.
func BenchmarkLimiterHit(b *testing.B) {
	l := newLimiter(nil, time.Now)
	e := &keyEntry{ready: make(chan struct{})}
	e.info.Store(&keyInfo{serverID: 1, tenantID: 1, serverRate: 1 << 30, tenantRate: 1 << 30, expires: time.Now().Add(time.Hour)})
	close(e.ready)
	l.keys.Store("key", e)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			info, err := l.lookup(context.Background(), "key")
			if err != nil || info == nil {
				b.Fatal("no entry", err)
			}
			if ok, _ := l.allow(info); !ok {
				b.Fatal("refused")
			}
		}
	})
}

func TestSweepDropsIdleEntries(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	l := newLimiter(nil, func() time.Time { return now })
	for key, expires := range map[string]time.Time{"idle": now.Add(-2 * idleAfter), "used": now} {
		e := &keyEntry{ready: make(chan struct{})}
		e.info.Store(&keyInfo{serverID: 1, tenantID: 1, serverRate: 1, expires: expires})
		close(e.ready)
		l.keys.Store(key, e)
	}
	bucketOf(&l.servers, 1).take(now.Add(-2*idleAfter), 1)
	bucketOf(&l.tenants, 1).take(now, 1)

	l.sweep(now)
	_, ok := l.keys.Load("idle")
	require.False(t, ok, "a key unused for long is dropped")
	_, ok = l.keys.Load("used")
	require.True(t, ok)
	_, ok = l.servers.Load(1)
	require.False(t, ok, "a bucket unused for long is dropped")
	_, ok = l.tenants.Load(1)
	require.True(t, ok)
}
