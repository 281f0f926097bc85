package inbound

import (
	"cmp"
	"context"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/routing"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// keyTTL is how long intake trusts what it read of a key's server and plan: a changed limit applies within
// it, in every process. A stale entry is served while it is refreshed in the background, so intake never
// waits on the database for a key it has seen. One refresh runs at a time, and it reloads every key that is
// due or will be within refreshAhead, a few statements for all of them: refreshes hold database connections
// that intake's commits would otherwise wait for.
const keyTTL = 5 * time.Second

// refreshAhead is how early a key is refreshed with others that are due, so that keys come due together and
// share a refresh rather than each starting its own.
const refreshAhead = keyTTL / 2

// refreshBatch bounds the keys one statement of a refresh asks for.
const refreshBatch = 500

// keyInfo is what intake needs of a key before it reads the body: whether the key names a live server, and
// the limits of that server and of its tenant's plan (0: none); and, for once it has, what the server checks
// and answers for its senders (nil: nothing).
type keyInfo struct {
	serverID, tenantID     int
	serverRate, tenantRate int
	senders                *senders
	expires                time.Time
}

type keyEntry struct {
	ready chan struct{} // closed once info or err is set
	info  atomic.Pointer[keyInfo]
	err   error
}

// limiter answers, before a body is read, whether a key names a server and whether a request to it is within
// its server's and its tenant's rate. Buckets live in this process only: with N processes sharing a load
// balancer, a cluster accepts up to N times a limit. A shared counter would cost intake a round trip per
// request (or per batch, under a lock every process contends for); the limits guard capacity, not billing.
type limiter struct {
	client *ent.Client
	now    func() time.Time

	// keys holds live servers' keys only (*keyEntry): unknown keys are not kept, so they cannot fill it. The
	// maps are read by every request and written rarely, which sync.Map serves without a shared lock.
	keys    sync.Map
	servers sync.Map // server ID → *bucket
	tenants sync.Map // tenant ID → *bucket
	// swept is when idle entries were last dropped (Unix nanoseconds).
	swept atomic.Int64
	// refreshing is set while a refresh runs.
	refreshing atomic.Bool

	// read loads keys (readKeys); a test may wrap it.
	read func(ctx context.Context, keys []string) (map[string]keyRead, error)
	// misses are keys seen for the first time and not loaded yet, with the entries their requests wait on;
	// loading is set while a loader runs (loadMisses). Both are guarded by missMu.
	missMu  sync.Mutex
	misses  map[string]*keyEntry
	loading bool
}

// idleAfter is how long an entry or a bucket goes unused before it is dropped: a key of a deleted server or
// a rotated-out key, a bucket that has long been full (a new one is the same).
const idleAfter = time.Minute

// loadTimeout bounds one read of keys seen for the first time: past it, the requests waiting on them fail
// (503) and the next request of each key tries again.
const loadTimeout = 30 * time.Second

func newLimiter(client *ent.Client, now func() time.Time) *limiter {
	l := &limiter{client: client, now: now, misses: map[string]*keyEntry{}}
	l.read = l.readKeys
	return l
}

// lookup returns the key's server and limits; nil for a key of no live server.
func (l *limiter) lookup(ctx context.Context, key string) (*keyInfo, error) {
	v, ok := l.keys.Load(key)
	if !ok {
		e := &keyEntry{ready: make(chan struct{})}
		if v, ok = l.keys.LoadOrStore(key, e); !ok {
			l.loadSoon(key, e)
		}
	}
	e := v.(*keyEntry)
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e.err != nil {
		return nil, e.err
	}
	info := e.info.Load()
	if info == nil { // no live server has the key
		return nil, nil
	}
	if now := l.now(); now.After(info.expires) && l.refreshing.CompareAndSwap(false, true) {
		startstop.Go(nil, "refresh intake limits", func() {
			defer l.refreshing.Store(false)
			l.refresh(now)
		})
		if last := l.swept.Load(); now.UnixNano()-last > int64(idleAfter) && l.swept.CompareAndSwap(last, now.UnixNano()) {
			startstop.Go(nil, "sweep intake limits", func() { l.sweep(now) })
		}
	}
	return info, nil
}

// loadSoon has a key seen for the first time loaded, with e its entry. One loader runs at a time and takes
// every key queued meanwhile, so that a burst of new keys (a restart under load, or a tenant's many servers
// called at once) costs a few statements, rather than a read per key at once that would hold the database
// connections intake's commits wait for.
func (l *limiter) loadSoon(key string, e *keyEntry) {
	l.missMu.Lock()
	defer l.missMu.Unlock()
	l.misses[key] = e
	if !l.loading {
		l.loading = true
		startstop.Go(nil, "load intake keys", l.loadMisses)
	}
}

// loadMisses loads the queued keys, a refreshBatch at a time, until none is left. Each entry is filled and
// made ready; one that found no live server, or failed, leaves the map, so that its next request tries again.
func (l *limiter) loadMisses() {
	for {
		keys, entries := l.takeMisses()
		if len(keys) == 0 {
			return
		}
		var reads map[string]keyRead
		var err error
		// A panic fails this batch's requests, not every later new key's: the loader goes on.
		if p := startstop.Recover(nil, "load intake keys", func() {
			ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
			defer cancel()
			reads, err = l.read(ctx, keys)
		}); p != nil {
			err = p
		}
		for _, key := range keys {
			e, r := entries[key], reads[key]
			e.info.Store(r.info)
			e.err = cmp.Or(err, r.err)
			if r.info == nil { // before the waiters wake: their next request must read again
				l.forget(key, e)
			}
			close(e.ready)
		}
	}
}

// takeMisses takes up to refreshBatch queued keys, in order, with their entries; none once the queue is empty,
// when the loader stops (a key queued after that starts another).
func (l *limiter) takeMisses() ([]string, map[string]*keyEntry) {
	l.missMu.Lock()
	defer l.missMu.Unlock()
	if len(l.misses) == 0 {
		l.loading = false
		return nil, nil
	}
	keys := slices.Sorted(maps.Keys(l.misses))
	keys = keys[:min(len(keys), refreshBatch)]
	entries := make(map[string]*keyEntry, len(keys))
	for _, key := range keys {
		entries[key] = l.misses[key]
		delete(l.misses, key)
	}
	return keys, entries
}

// refresh reloads every entry due by now+refreshAhead. An entry that failed to load keeps its last known
// limits, and the next request that finds it due tries again.
func (l *limiter) refresh(now time.Time) {
	due := map[string]*keyEntry{}
	l.keys.Range(func(key, v any) bool {
		e := v.(*keyEntry)
		select {
		case <-e.ready:
			if info := e.info.Load(); info != nil && info.expires.Before(now.Add(refreshAhead)) {
				due[key.(string)] = e
			}
		default: // still loading
		}
		return true
	})
	keys := slices.Sorted(maps.Keys(due))
	for chunk := range slices.Chunk(keys, refreshBatch) {
		reads, err := l.read(context.Background(), chunk)
		if err != nil {
			continue
		}
		for _, key := range chunk {
			switch r := reads[key]; {
			case r.err != nil:
			case r.info != nil:
				due[key].info.Store(r.info)
			default:
				l.forget(key, due[key])
			}
		}
	}
}

// sweep drops what has not been used for idleAfter. An entry in use is refreshed once it expires, so one
// expired for that long has had no request since.
func (l *limiter) sweep(now time.Time) {
	l.keys.Range(func(key, v any) bool {
		e := v.(*keyEntry)
		if info := e.info.Load(); info != nil && now.Sub(info.expires) > idleAfter {
			l.forget(key.(string), e)
		}
		return true
	})
	for _, m := range []*sync.Map{&l.servers, &l.tenants} {
		m.Range(func(id, v any) bool {
			if v.(*bucket).idleSince(now) > idleAfter {
				m.CompareAndDelete(id, v)
			}
			return true
		})
	}
}

func (l *limiter) forget(key string, e *keyEntry) { l.keys.CompareAndDelete(key, e) }

// keyRead is what read found of one key: its info, nil for a key of no live server or a replaced key past its
// grace, or the error that kept it from being read.
type keyRead struct {
	info *keyInfo
	err  error
}

// readKeys loads the live servers of keys, with their settings for senders, and their plans' limits: three
// indexed reads however many keys.
func (l *limiter) readKeys(ctx context.Context, keys []string) (map[string]keyRead, error) {
	const op = "inbound.lookup"
	ctx = viewer.SystemContext(ctx)
	servers, err := l.client.Server.Query().
		Where(server.Or(server.InboundKeyIn(keys...), server.PreviousInboundKeyIn(keys...)), server.DeletedAtIsNil(),
			server.KindEQ(server.KindINBOUND)).
		Select(server.FieldTenantID, server.FieldMaxRequestsPerSecond, server.FieldInboundKey,
			server.FieldPreviousInboundKey, server.FieldPreviousKeyExpiresAt, server.FieldVerification,
			server.FieldAllowedMethods, server.FieldResponseStatus, server.FieldResponseContentType,
			server.FieldResponseBody, server.FieldEventTypeHeader, server.FieldEventTypePath,
			server.FieldSchemaValidation).All(ctx)
	if err != nil {
		return nil, storage.Err(op, "server", err)
	}
	reads := make(map[string]keyRead, len(keys))
	if len(servers) == 0 {
		return reads, nil
	}
	tenants := make([]int, 0, len(servers))
	for _, srv := range servers {
		tenants = append(tenants, srv.TenantID)
	}
	plans, err := billing.PlansOf(ctx, l.client, tenants)
	if err != nil {
		return nil, err
	}
	asked := make(map[string]bool, len(keys))
	for _, k := range keys {
		asked[k] = true
	}
	now := l.now()
	for _, srv := range servers {
		senders, err := sendersOf(srv)
		for _, key := range routing.InboundKeys(srv, now) { // a replaced key past its grace is not one
			if !asked[key] {
				continue
			}
			if err != nil {
				reads[key] = keyRead{err: err}
				continue
			}
			info := &keyInfo{serverID: srv.ID, tenantID: srv.TenantID, senders: senders, expires: now.Add(keyTTL)}
			if key != srv.InboundKey && srv.PreviousKeyExpiresAt.Before(info.expires) {
				info.expires = *srv.PreviousKeyExpiresAt // a replaced key is looked up again when its grace ends
			}
			if srv.MaxRequestsPerSecond != nil {
				info.serverRate = *srv.MaxRequestsPerSecond
			}
			if plan := plans[srv.TenantID]; plan != nil && plan.MaxRequestsPerSecond != nil {
				info.tenantRate = *plan.MaxRequestsPerSecond
			}
			reads[key] = keyRead{info: info}
		}
	}
	return reads, nil
}

// allow takes one request from the server's bucket and the tenant's; when either is empty it takes none and
// says how long until both may have one again.
func (l *limiter) allow(info *keyInfo) (ok bool, retryAfter time.Duration) {
	if info.serverRate == 0 && info.tenantRate == 0 {
		return true, 0
	}
	now := l.now()
	var srv, tn *bucket
	if info.serverRate > 0 {
		srv = bucketOf(&l.servers, info.serverID)
	}
	if info.tenantRate > 0 {
		tn = bucketOf(&l.tenants, info.tenantID)
	}
	if srv != nil {
		if ok, wait := srv.take(now, info.serverRate); !ok {
			return false, wait
		}
	}
	if tn != nil {
		if ok, wait := tn.take(now, info.tenantRate); !ok {
			if srv != nil {
				srv.giveBack()
			}
			return false, wait
		}
	}
	return true, 0
}

func bucketOf(m *sync.Map, id int) *bucket {
	v, ok := m.Load(id)
	if !ok {
		v, _ = m.LoadOrStore(id, &bucket{})
	}
	return v.(*bucket)
}

// bucket is a token bucket refilled at rate per second, holding at most one second's worth: a sender may
// burst up to its rate, then goes at the rate.
type bucket struct {
	mu     sync.Mutex
	tokens float64
	rate   int
	last   time.Time
}

func (b *bucket) take(now time.Time, rate int) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last.IsZero() {
		b.tokens = float64(rate)
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens += d.Seconds() * float64(rate)
	}
	b.rate, b.last = rate, now
	b.tokens = min(b.tokens, float64(rate))
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / float64(rate) * float64(time.Second))
}

func (b *bucket) idleSince(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return now.Sub(b.last)
}

func (b *bucket) giveBack() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.tokens+1, float64(b.rate))
}

// retryAfterSeconds is a wait as a Retry-After value: whole seconds, at least one.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// bodyBudget bounds the bytes of bodies being read or stored at once in this process. A request reserves its
// declared length, or the largest body allowed when it declares none, before its body is read.
type bodyBudget struct {
	limit int64
	used  atomic.Int64
}

// reserve takes n bytes of the budget, or reports that they are not free.
func (b *bodyBudget) reserve(n int64) bool {
	if b.used.Add(n) > b.limit {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *bodyBudget) release(n int64) { b.used.Add(-n) }
