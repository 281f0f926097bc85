package relay

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestSetGCPercent: without GOGC the collector's target becomes GCPercent; with GOGC set, the target the
// runtime took from it stays.
func TestSetGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	if got := SetGCPercent(); got != GCPercent {
		t.Fatalf("without GOGC: returned %d, want %d", got, GCPercent)
	}
	if now := debug.SetGCPercent(GCPercent); now != GCPercent {
		t.Fatalf("without GOGC: the collector's target is %d, want %d", now, GCPercent)
	}

	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50) // what the runtime would have read from GOGC=50 at start
	if got := SetGCPercent(); got != 50 {
		t.Fatalf("with GOGC=50: returned %d, want 50", got)
	}
	if now := debug.SetGCPercent(50); now != 50 {
		t.Fatalf("with GOGC=50: the collector's target is %d, want it left at 50", now)
	}
}
