package events

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain checks, after every test has finished (parallel tests share the process, so a per-test check would
// see the others' goroutines), that no goroutine of this package, of lib/pq's listener or of a database/sql
// pool is left. It does what goleak.VerifyTestMain would, restricted to the goroutines this package can
// start: importing goleak directly needs go.mod to list it as a direct requirement, and this package must not
// change go.mod.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaks := waitNoLeaks(5 * time.Second); len(leaks) > 0 {
			fmt.Fprintf(os.Stderr, "events: %d leaked goroutine(s):\n\n%s\n", len(leaks), strings.Join(leaks, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// waitNoLeaks retries because goroutines that were told to exit (an AfterFunc that just closed a channel, a
// listener that was just closed) may still be on their way out when the last test returns.
func waitNoLeaks(within time.Duration) []string {
	deadline := time.Now().Add(within)
	for {
		leaks := leakedGoroutines()
		if len(leaks) == 0 || time.Now().After(deadline) {
			return leaks
		}
		time.Sleep(10 * time.Millisecond) // polling runtime state, which offers nothing to wait on
	}
}

func leakedGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var leaks []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "events.leakedGoroutines") { // this one
			continue
		}
		if strings.Contains(g, "github.com/adal-relay/adal/events.") ||
			strings.Contains(g, "github.com/lib/pq.") ||
			strings.Contains(g, "database/sql.(*DB).connectionOpener") {
			leaks = append(leaks, g)
		}
	}
	return leaks
}

// count is the number of live subscribers; tests use it to prove cancelled subscriptions are gone.
func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}
