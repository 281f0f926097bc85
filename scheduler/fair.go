package scheduler

import (
	"strconv"
	"sync"
)

// fairShare keeps, for one process, the attempts each tenant has in flight (deliveries and outbound jobs alike)
// and bounds them, so that one tenant's slow recipients never hold every worker: a tenant may hold at most
// alone workers while it is the only one busy here, and no more than an equal share of the workers while
// others are busy too — busy meaning attempts in flight here, or due work the last claim left in the table for
// want of room (waiting). A tenant not busy yet may take as much as it would once counted, so another tenant's
// new delivery finds a free worker at once. Intake's hand-off is held to the equal share only while another
// tenant waits: until then there is no one to be fair to, and a tenant's burst goes straight to workers
// rather than through the table. Attempts already in flight are never cut short: a tenant over its new share
// gets nothing more until it is back under it.
type fairShare struct {
	workers, alone int
	// wakeAt is how many attempts of waiting tenants must finish before the claim loop is woken for them, so
	// that claims for them come in batches (as Scheduler.wakeAt does for free workers).
	wakeAt int

	mu      sync.Mutex
	flying  map[int]int  // tenant → attempts in flight here; no entry at zero
	waiting map[int]bool // tenants the last claim that looked at them left due work to
	freed   int          // attempts of waiting tenants finished since the last claim
	share   int          // the share of a busy tenant as the last claim worked it out
}

func newFairShare(workers int, share float64, wakeAt int) *fairShare {
	alone := max(1, int(share*float64(workers)))
	return &fairShare{workers: workers, alone: alone, wakeAt: wakeAt, flying: map[int]int{}, waiting: map[int]bool{},
		share: alone}
}

// shareOf is what each of n busy tenants may hold.
func (f *fairShare) shareOf(n int) int { return max(1, min(f.alone, f.workers/max(n, 1))) }

// busy is how many tenants are busy here; under mu.
func (f *fairShare) busy() int {
	n := len(f.flying)
	for t := range f.waiting {
		if f.flying[t] == 0 {
			n++
		}
	}
	return n
}

// rooms is what the next claim may take of each tenant.
func (f *fairShare) rooms() shares {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.busy()
	f.share = f.shareOf(n)
	sh := shares{other: f.shareOf(n + 1), given: make(map[int]int, n), waited: make(map[int]bool, len(f.waiting))}
	sh.most = sh.other
	b := make([]byte, 0, 2+18*n)
	b = append(b, '[')
	add := func(tenant, room, flying int) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(tenant), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(room), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(flying), 10)
		if f.waiting[tenant] {
			b = append(b, ",0]"...)
			sh.waited[tenant] = true
		} else {
			b = append(b, ",1]"...)
		}
		sh.most = max(sh.most, room)
		sh.given[tenant] = room
	}
	for t, k := range f.flying {
		add(t, max(0, f.share-k), k)
	}
	for t := range f.waiting {
		if f.flying[t] == 0 {
			add(t, f.share, 0)
		}
	}
	sh.rooms = string(append(b, ']'))
	return sh
}

// room is what intake may hand tenant now; under mu.
func (f *fairShare) room(tenant int) int {
	if k, ok := f.flying[tenant]; ok || f.waiting[tenant] {
		return max(0, f.limit(tenant, f.busy())-k)
	}
	return f.limit(tenant, f.busy()+1)
}

// limit is what intake may hand tenant in all, with n the busy tenants it is counted among: alone while no
// other tenant waits for room, its share otherwise; under mu.
func (f *fairShare) limit(tenant, n int) int {
	others := len(f.waiting)
	if f.waiting[tenant] {
		others--
	}
	if others == 0 {
		return f.alone
	}
	return f.shareOf(n)
}

// claimed notes what a claim given sh took, by tenant. Where the claim could tell (left is not nil), it read
// one row past the room of each tenant not waiting, and such a tenant is waiting exactly when the claim left
// due work of it in the table; a tenant already waiting stays so unless it got less than its room and the
// claim left it nothing. Otherwise a tenant that got its whole room, or had none, may have more due, and is
// waiting; one given room that got less has nothing more due — unless the claim ran out of workers first
// (full), and then the tenants it took nothing from are left as they were.
func (f *fairShare) claimed(sh shares, took map[int]int, left map[int]bool, full bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.freed = 0
	if left != nil {
		for t, room := range sh.given {
			if !left[t] && (!sh.waited[t] || room > 0 && took[t] < room) {
				delete(f.waiting, t)
			}
		}
		for t, waits := range left {
			if waits {
				f.waiting[t] = true
			}
		}
		return
	}
	for t, n := range took {
		room, ok := sh.given[t]
		if !ok {
			room = sh.other
		}
		switch {
		case n >= room:
			f.waiting[t] = true
		case !full:
			delete(f.waiting, t)
		}
	}
	if full {
		return
	}
	for t, room := range sh.given {
		if _, ok := took[t]; ok {
			continue
		}
		if room == 0 {
			f.waiting[t] = true
		} else {
			delete(f.waiting, t)
		}
	}
}

// add counts attempts of tenant starting here.
func (f *fairShare) add(tenant, n int) {
	if n == 0 {
		return
	}
	f.mu.Lock()
	f.flying[tenant] += n
	f.mu.Unlock()
}

// done counts an attempt of tenant ended (or given back unstarted) and reports whether the claim loop should
// be woken for the waiting tenants: enough of their attempts have ended since the last claim.
func (f *fairShare) done(tenant, n int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.flying[tenant] -= n; f.flying[tenant] <= 0 {
		delete(f.flying, tenant)
	}
	if !f.waiting[tenant] {
		return false
	}
	f.freed += n
	return f.freed >= min(f.wakeAt, f.share)
}

// reserve grants intake up to slots workers for new deliveries, want[t] of them at most for tenant t, within
// each tenant's room, and counts them in flight. Waiting tenants get none: their due deliveries, already in
// the table, go first.
func (f *fairShare) reserve(want map[int]int, slots int) (map[int]int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	granted := make(map[int]int, len(want))
	total := 0
	for t, n := range want {
		if total == slots {
			break
		}
		if f.waiting[t] {
			continue
		}
		g := min(n, f.room(t), slots-total)
		if g <= 0 {
			continue
		}
		granted[t] = g
		f.flying[t] += g
		total += g
	}
	return granted, total
}
