package inbound

import (
	"slices"
	"sync"
	"time"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/routing"
)

// serverCache keeps, by inbound key, the servers intake read on PostgreSQL, with their live recipients and
// their version (delivery.ServerVersionSQL), so that a batch whose keys were seen before reads no server: its
// statement stores a request only if the server is still at the version cached, and names the servers that
// changed, which intake then reads again (storeUnlocked). The cache saves a round trip per batch and can never
// make intake store a request against a server as it no longer is.
//
// The servers and recipients it holds are shared by the batches that use them: nothing may change them.
type serverCache struct {
	mu       sync.Mutex
	byKey    map[string]*cachedServer
	byServer map[int][]string // the keys each cached server is filed under
	swept    time.Time
}

type cachedServer struct {
	server  *ent.Server
	version string
	used    time.Time
}

func newServerCache() *serverCache {
	return &serverCache{byKey: map[string]*cachedServer{}, byServer: map[int][]string{}}
}

// get returns the cached servers of keys that still accept their key at now, by key, with their versions by
// server ID, and the keys it holds no such server for.
func (c *serverCache) get(keys []string, now time.Time) (servers map[string]*ent.Server, versions map[int]string, missing []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.swept) > idleAfter {
		c.sweep(now)
	}
	servers, versions = make(map[string]*ent.Server, len(keys)), make(map[int]string, len(keys))
	for _, k := range keys {
		e := c.byKey[k]
		if e == nil || !slices.Contains(routing.InboundKeys(e.server, now), k) {
			missing = append(missing, k)
			continue
		}
		e.used = now
		servers[k], versions[e.server.ID] = e.server, e.version
	}
	return servers, versions, missing
}

// put caches servers, as read at now, by key, with their versions; a server read again replaces its entries.
func (c *serverCache) put(servers map[string]*ent.Server, versions map[int]string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, srv := range servers {
		if e := c.byKey[k]; e != nil && e.server.ID != srv.ID {
			c.drop(e.server.ID) // the key moved to another server
		}
	}
	for k, srv := range servers {
		if e := c.byKey[k]; e == nil || e.server != srv {
			if e == nil {
				c.byServer[srv.ID] = append(c.byServer[srv.ID], k)
			}
			c.byKey[k] = &cachedServer{server: srv, version: versions[srv.ID], used: now}
		}
	}
}

// forget drops the servers with these IDs: they changed, or are gone.
func (c *serverCache) forget(ids []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		c.drop(id)
	}
}

// drop removes server id's entries, with mu held.
func (c *serverCache) drop(id int) {
	for _, k := range c.byServer[id] {
		if e := c.byKey[k]; e != nil && e.server.ID == id {
			delete(c.byKey, k)
		}
	}
	delete(c.byServer, id)
}

// sweep drops the servers none of whose keys was used for idleAfter, with mu held: deleted servers, keys
// rotated out, senders gone quiet.
func (c *serverCache) sweep(now time.Time) {
	c.swept = now
	for id, keys := range c.byServer {
		idle := true
		for _, k := range keys {
			if e := c.byKey[k]; e != nil && now.Sub(e.used) <= idleAfter {
				idle = false
			}
		}
		if idle {
			c.drop(id)
		}
	}
}
