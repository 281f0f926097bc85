package relay

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage collector's target (GOGC) a server runs with when the environment does not set one.
// A relay under load allocates tens of KB per request that die within the request, so with Go's default of
// 100 the collector runs often for little. On two cores shared with PostgreSQL (docs/benchmarks.md, machine I),
// 200 took Adal's CPU at the same offered load down by 6–9% (per scenario, over four interleaved pairs), for a
// peak RSS of 88–104 MiB against 73–87 at full intake (the budget is 150 MiB). 400 saved a little more and
// reached 124–154 MiB; 300, 108–125 MiB.
const GCPercent = 200

// SetGCPercent sets the collector's target to GCPercent unless GOGC is set, and returns the target in force
// (-1: collection off). cmd/server calls it before it opens the relay, and the bench, which runs the relay in
// its own process, does the same.
func SetGCPercent() int {
	if os.Getenv("GOGC") != "" {
		pct := debug.SetGCPercent(100) // reading it means setting it: put back what GOGC made it at once
		debug.SetGCPercent(pct)
		return pct
	}
	debug.SetGCPercent(GCPercent)
	return GCPercent
}
