package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// sink keeps the test's allocations on the heap.
var sink []*[64]byte

// TestCostsCountAWindow: a cost window counts what happened between its start and its stop, and only that — the
// statements and transaction control sent through the SQLCounter, the WAL position's advance, the CPU time and
// the Go heap's allocations — and divides them by the units of work.
func TestCostsCountAWindow(t *testing.T) {
	counter := &SQLCounter{}
	counter.statement("SELECT before the window")
	wal := int64(1000)
	cpu := time.Second
	m := costMeter{
		cpu:  func() (time.Duration, bool) { return cpu, true },
		sql:  counter,
		wal:  func(context.Context) (int64, error) { return wal, nil },
		heap: true,
	}
	const n = 50_000
	k := m.start(t.Context())
	sink = make([]*[64]byte, n) // one allocation more
	for i := range sink {
		sink[i] = new([64]byte)
	}
	for range 3 * n {
		counter.statement("SELECT 1")
	}
	counter.txControl.Add(n)
	wal += 2048 * n
	cpu += 500 * time.Millisecond
	got := k.stop(t.Context(), n, "attempt")
	counter.statement("SELECT after the window")

	if got.Unit != "attempt" || got.Units != n || got.Wall <= 0 {
		t.Errorf("unit %q, units %d, wall %v", got.Unit, got.Units, got.Wall)
	}
	if !got.SQLOK || got.Statements != 3*n || got.TxControl != n {
		t.Errorf("statements %d + %d (ok %v), want %d + %d", got.Statements, got.TxControl, got.SQLOK, 3*n, n)
	}
	if !got.WALOK || got.WAL != 2048*n {
		t.Errorf("WAL %d (ok %v), want %d", got.WAL, got.WALOK, 2048*n)
	}
	if !got.CPUOK || got.CPU != 500*time.Millisecond {
		t.Errorf("CPU %v (ok %v), want 500ms", got.CPU, got.CPUOK)
	}
	// The runtime counts small objects a span at a time, and the test's own goroutines allocate a little: the
	// count is near n, not exactly n.
	if !got.HeapOK || got.Allocs < n*98/100 || got.Allocs > n*120/100 {
		t.Errorf("allocs %d (ok %v), want about %d", got.Allocs, got.HeapOK, n)
	}
	if want := uint64(n * (64 + 8)); got.AllocBytes < want*98/100 || got.AllocBytes > want*120/100 {
		t.Errorf("allocated %d bytes, want about %d", got.AllocBytes, want)
	}
	// The allocation counts vary a little: the text around them is checked.
	if s := got.Format(); !strings.HasPrefix(s, "per attempt: 3.00 statements + 1.00 BEGIN/COMMIT, 2.00 KiB WAL, ") ||
		!strings.HasSuffix(s, " B); 10.0 CPU-ms per 1,000") {
		t.Errorf("format %q", s)
	}
}

// TestCostsLeaveOutWhatCannotBeRead: a source that fails or is absent leaves its figure out, instead of a zero
// that would read as free.
func TestCostsLeaveOutWhatCannotBeRead(t *testing.T) {
	calls := 0
	m := costMeter{
		cpu: func() (time.Duration, bool) { return 0, false },
		wal: func(context.Context) (int64, error) {
			if calls++; calls > 1 {
				return 0, errors.New("connection lost")
			}
			return 1, nil
		},
	}
	got := m.start(t.Context()).stop(t.Context(), 10, "request")
	if got.CPUOK || got.WALOK || got.SQLOK || got.HeapOK || got.TransactionsOK {
		t.Fatalf("%+v: a figure that could not be read is marked read", got)
	}
	if s := got.Format(); s != "per request: " {
		t.Fatalf("format %q", s)
	}
}

// TestCostFormat: each figure per unit of work with three significant digits, the CPU per 1,000 units; the
// transactions of the cluster scenario in place of statements; nothing for a row without a unit of work.
func TestCostFormat(t *testing.T) {
	k := Cost{Unit: "attempt", Units: 2000, Wall: 4 * time.Second,
		CPU: 168 * time.Millisecond, CPUOK: true,
		Statements: 4200, TxControl: 800, SQLOK: true,
		WAL: 3_112_960, WALOK: true,
		Allocs: 620_000, AllocBytes: 43_008_000, HeapOK: true}
	if got, want := k.Format(), "per attempt: 2.10 statements + 0.400 BEGIN/COMMIT, 1.52 KiB WAL, 310 allocs (21.0 KiB); 84.0 CPU-ms per 1,000"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if r := k.Rate(); r != 500 {
		t.Errorf("rate %v, want 500/s", r)
	}
	cluster := Cost{Unit: "request", Units: 2000, CPU: 2500 * time.Millisecond, CPUOK: true, WAL: 4_900_000, WALOK: true}.
		withTransactions(1040, 2000)
	if got, want := cluster.Format(), "per request: 0.520 transactions, 2.39 KiB WAL; 1,250 CPU-ms per 1,000"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := (Cost{Unit: "attempt"}).Format(); got != "no attempt in the window" {
		t.Errorf("no units: %q", got)
	}
	if got := (Cost{Unit: "attempt"}).withTransactions(600, 300).Format(); got != "no attempt in the window; 2.00 transactions per attempt" {
		t.Errorf("no units in the window, transactions over their own: %q", got)
	}
	if got := (Cost{}).Format(); got != "" {
		t.Errorf("no unit of work: %q", got)
	}
}

// TestSig3: three significant digits, a rounding up to the next power of ten not gaining a digit, thousands
// grouped.
func TestSig3(t *testing.T) {
	for x, want := range map[float64]string{
		0: "0", 84: "84.0", 2.104: "2.10", 0.4: "0.400", 0.0012345: "0.00123", 99.96: "100", 9.996: "10.0",
		999.4: "999", 999.6: "1,000", 12345.6: "12,346", 1234567: "1,234,567",
	} {
		if got := sig3(x); got != want {
			t.Errorf("sig3(%v) = %q, want %q", x, got, want)
		}
	}
	for b, want := range map[float64]string{512: "512 B", 1556.48: "1.52 KiB", 3.5 * (1 << 20): "3.50 MiB"} {
		if got := size3(b); got != want {
			t.Errorf("size3(%v) = %q, want %q", b, got, want)
		}
	}
}

// TestSelfCPU: this process's CPU time grows as it works.
func TestSelfCPU(t *testing.T) {
	from, ok := selfCPU()
	if !ok {
		t.Skip("getrusage is not available")
	}
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for time.Now().Before(deadline) {
		for i := range 1_000_000 {
			x += i
		}
		if now, _ := selfCPU(); now-from >= 20*time.Millisecond {
			return
		}
	}
	t.Fatalf("no CPU time counted in 10 s of work (%d)", x)
}
