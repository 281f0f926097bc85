package inbound

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/storage/dbtest"
)

// TestNewKeysAreLoadedTogether: keys seen for the first time while a load runs wait for it and are then loaded
// together, by one read, rather than each by its own at once; each request gets its own key's server, a key of
// no server is answered nil and not kept, and a read that fails or panics fails only its own batch's requests,
// whose next request reads again.
func TestNewKeysAreLoadedTogether(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	plan, err := db.Client.Plan.Create().SetName("p").SetMonthlyCredits(0).SetRetentionDays(7).
		SetMaxServers(30).SetMaxRecipientsPerServer(1).Save(ctx)
	require.NoError(t, err)
	tn, err := db.Client.Tenant.Create().SetName("t").SetPlanID(plan.ID).Save(ctx)
	require.NoError(t, err)
	const n = 20
	ids := map[string]int{}
	for i := range n {
		key := fmt.Sprintf("k-%02d", i)
		srv, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName(key).SetInboundKey(key).Save(ctx)
		require.NoError(t, err)
		ids[key] = srv.ID
	}

	l := newLimiter(db.Client, time.Now)
	read := l.read
	var mu sync.Mutex
	var calls [][]string
	release := make(chan struct{})
	fail := error(nil)
	l.read = func(ctx context.Context, keys []string) (map[string]keyRead, error) {
		mu.Lock()
		calls = append(calls, keys)
		first, failing := len(calls) == 1, fail
		mu.Unlock()
		if first {
			<-release // the first load holds until every other new key has queued behind it
		}
		switch {
		case failing != nil && failing.Error() == "panic":
			panic("read broke")
		case failing != nil:
			return nil, failing
		}
		return read(ctx, keys)
	}
	type answer struct {
		key  string
		info *keyInfo
		err  error
	}
	answers := make(chan answer, n+1)
	lookup := func(key string) {
		info, err := l.lookup(t.Context(), key)
		answers <- answer{key, info, err}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			require.True(t, time.Now().Before(deadline), "waiting for %s", what)
		}
	}

	go lookup("k-00")
	waitFor("the first load", func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) == 1 })
	for i := 1; i < n; i++ {
		go lookup(fmt.Sprintf("k-%02d", i))
	}
	go lookup("no-such-key")
	waitFor("every new key to queue", func() bool { l.missMu.Lock(); defer l.missMu.Unlock(); return len(l.misses) == n })
	close(release)
	for range n + 1 {
		a := <-answers
		require.NoError(t, a.err, a.key)
		if a.key == "no-such-key" {
			require.Nil(t, a.info)
			continue
		}
		require.NotNil(t, a.info, a.key)
		require.Equal(t, ids[a.key], a.info.serverID, a.key)
		require.Equal(t, tn.ID, a.info.tenantID, a.key)
	}
	rest := []string{"no-such-key"}
	for i := 1; i < n; i++ {
		rest = append(rest, fmt.Sprintf("k-%02d", i))
	}
	slices.Sort(rest)
	require.Equal(t, [][]string{{"k-00"}, rest}, calls, "two reads: the first key's, then all that came meanwhile")
	_, kept := l.keys.Load("no-such-key")
	require.False(t, kept, "a key of no server is not kept")
	_, kept = l.keys.Load("k-05")
	require.True(t, kept)

	// A read that fails, or panics, answers its requests with an error and leaves their keys to be read again.
	for _, broken := range []error{errors.New("database down"), errors.New("panic")} {
		mu.Lock()
		fail = broken
		mu.Unlock()
		info, err := l.lookup(t.Context(), "k-new")
		require.Error(t, err, broken.Error())
		require.Nil(t, info)
		_, kept = l.keys.Load("k-new")
		require.False(t, kept, "a failed key is read again by its next request")
	}
	srv, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("new").SetInboundKey("k-new").Save(ctx)
	require.NoError(t, err)
	mu.Lock()
	fail = nil
	mu.Unlock()
	info, err := l.lookup(t.Context(), "k-new")
	require.NoError(t, err, "the loader goes on after a panic")
	require.Equal(t, srv.ID, info.serverID)
}
