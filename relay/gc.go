package relay

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage collector's target (GOGC) a server runs with when the environment does not set one.
// A relay under load allocates memory per request that dies with the request, so with Go's default of 100 the
// collector runs often for little; 200 trades some peak memory (still well inside the server's memory budget)
// for noticeably less CPU spent collecting. Higher values save little more and cost much more memory.
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
