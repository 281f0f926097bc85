package bench

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cost is what the Adal process(es) under test spent on the work of a measured window, and how much work that
// was. Rates and latencies move with whatever else the machine does; the cost of one unit of work moves far
// less, so a few runs of two builds tell them apart where wall-clock figures need dozens (docs/benchmarks.md).
// A figure that could not be read is left out of Format, not shown as zero.
type Cost struct {
	// Unit names one unit of work ("request", "attempt"…); Units is how many were done in the window.
	Unit  string
	Units int64
	// Wall is the window's length.
	Wall time.Duration
	// CPU is the user + system CPU time of the Adal process(es) under test: this process's when Adal runs in
	// it (the bench's own bookkeeping in the window included, a small share), else its cmd/server processes'.
	CPU   time.Duration
	CPUOK bool
	// Statements and TxControl are what the Adal process in this one sent to PostgreSQL, counted by its
	// SQLCounter; SQLOK is false where Adal runs in other processes, whose statements cannot be counted.
	Statements, TxControl int64
	SQLOK                 bool
	// Transactions are the database's committed and rolled-back transactions over TxUnits units of work: the
	// fallback for statements across processes, read over a window of its own, since PostgreSQL publishes them
	// late (see the cluster scenario).
	Transactions, TxUnits int64
	TransactionsOK        bool
	// WAL is how far the server's WAL position advanced, in bytes: the whole server's, whatever wrote it.
	WAL   int64
	WALOK bool
	// Allocs and AllocBytes are this process's Go heap allocations, counted as testing's allocs/op counts
	// them; HeapOK is false where Adal runs in other processes.
	Allocs, AllocBytes uint64
	HeapOK             bool
}

// Rate is the units of work per second of the window; 0 for an empty one.
func (k Cost) Rate() float64 {
	if k.Units <= 0 || k.Wall <= 0 {
		return 0
	}
	return float64(k.Units) / k.Wall.Seconds()
}

// per is x per unit of work.
func (k Cost) per(x float64) float64 { return x / float64(k.Units) }

// Format states the cost of one unit of work, in the form "per attempt: S statements + T BEGIN/COMMIT, W KiB
// WAL, A allocs (B KiB); C CPU-ms per 1,000". CPU is per 1,000 units, as a per-unit figure would be a fraction
// of a millisecond; three significant digits are enough for the ratio of two builds' figures.
func (k Cost) Format() string {
	if k.Unit == "" {
		return ""
	}
	if k.Units <= 0 {
		s := "no " + k.Unit + " in the window"
		if k.TransactionsOK && k.TxUnits > 0 { // counted over a window of their own
			s += fmt.Sprintf("; %s transactions per %s", sig3(float64(k.Transactions)/float64(k.TxUnits)), k.Unit)
		}
		return s
	}
	var parts []string
	if k.SQLOK {
		parts = append(parts, fmt.Sprintf("%s statements + %s BEGIN/COMMIT", sig3(k.per(float64(k.Statements))),
			sig3(k.per(float64(k.TxControl)))))
	}
	if k.TransactionsOK && k.TxUnits > 0 {
		parts = append(parts, sig3(float64(k.Transactions)/float64(k.TxUnits))+" transactions")
	}
	if k.WALOK {
		parts = append(parts, size3(k.per(float64(k.WAL)))+" WAL")
	}
	if k.HeapOK {
		parts = append(parts, fmt.Sprintf("%s allocs (%s)", sig3(k.per(float64(k.Allocs))), size3(k.per(float64(k.AllocBytes)))))
	}
	s := "per " + k.Unit + ": " + strings.Join(parts, ", ")
	if k.CPUOK {
		s += fmt.Sprintf("; %s CPU-ms per 1,000", sig3(k.per(float64(k.CPU))*1000/float64(time.Millisecond)))
	}
	return s
}

// withTransactions is k with the transactions counted over units units of work.
func (k Cost) withTransactions(xacts, units int64) Cost {
	k.Transactions, k.TxUnits, k.TransactionsOK = xacts, units, true
	return k
}

// plus is the cost of k's work and o's together, as if measured over one window: how the shaping scenario
// sums the runs of one side of its A/B. A figure read in only one of them is not read.
func (k Cost) plus(o Cost) Cost {
	if k.Unit == "" {
		return o
	}
	k.Units += o.Units
	k.Wall += o.Wall
	k.CPU, k.CPUOK = k.CPU+o.CPU, k.CPUOK && o.CPUOK
	k.Statements, k.TxControl, k.SQLOK = k.Statements+o.Statements, k.TxControl+o.TxControl, k.SQLOK && o.SQLOK
	k.Transactions, k.TxUnits = k.Transactions+o.Transactions, k.TxUnits+o.TxUnits
	k.TransactionsOK = k.TransactionsOK && o.TransactionsOK
	k.WAL, k.WALOK = k.WAL+o.WAL, k.WALOK && o.WALOK
	k.Allocs, k.AllocBytes, k.HeapOK = k.Allocs+o.Allocs, k.AllocBytes+o.AllocBytes, k.HeapOK && o.HeapOK
	return k
}

// cpuPer1000 is the CPU-ms per 1,000 units of work, as Format gives it; 0 when it was not read.
func (k Cost) cpuPer1000() float64 {
	if !k.CPUOK || k.Units <= 0 {
		return 0
	}
	return k.per(float64(k.CPU)) * 1000 / float64(time.Millisecond)
}

// sig3 writes x with three significant digits, or as a whole number from 1,000 on, its thousands grouped as
// "1,000" is.
func sig3(x float64) string {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	// Rounded first, so that 99.96 becomes 100, not 100.0.
	scale := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(x))))
	r := math.Round(x*scale) / scale
	if math.Abs(r) >= 1000 {
		return grouped(int64(math.Round(x)))
	}
	decimals := max(0, 2-int(math.Floor(math.Log10(math.Abs(r)))))
	return strconv.FormatFloat(r, 'f', decimals, 64)
}

// grouped writes n with its thousands separated by commas.
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return sign + s
}

// size3 writes a size in bytes with three significant digits, in B, KiB or MiB.
func size3(b float64) string {
	switch {
	case b >= 1<<20:
		return sig3(b/(1<<20)) + " MiB"
	case b >= 1<<10:
		return sig3(b/(1<<10)) + " KiB"
	}
	return sig3(b) + " B"
}

// costMeter reads the counters a Cost is the difference of, from the sources a scenario has: the Adal
// process(es)' CPU, and, when Adal runs in this process, its statements and Go heap allocations; the server's
// WAL position from a connection of the bench's, which reading it does not advance.
type costMeter struct {
	cpu  func() (time.Duration, bool)         // the Adal process(es)' CPU time so far
	sql  *SQLCounter                          // nil: Adal is not in this process
	wal  func(context.Context) (int64, error) // nil: not read
	heap bool                                 // Adal is in this process: read the Go heap's allocations
}

// costSample is one reading of a costMeter: an edge of a measured window.
type costSample struct {
	at                 time.Time
	cpu                time.Duration
	cpuOK              bool
	sql                SQLCount
	sqlOK              bool
	wal                int64
	walOK              bool
	allocs, allocBytes uint64
	heapOK             bool
}

// sample reads the counters. The WAL position, a round trip to the server, is read first, so that the
// in-process counters and the time are read together.
func (m costMeter) sample(ctx context.Context) costSample {
	var s costSample
	if m.wal != nil {
		var err error
		s.wal, err = m.wal(ctx)
		s.walOK = err == nil
	}
	if m.sql != nil {
		s.sql, s.sqlOK = m.sql.Read(), true
	}
	if m.heap {
		s.allocs, s.allocBytes, s.heapOK = heapAllocs()
	}
	if m.cpu != nil {
		s.cpu, s.cpuOK = m.cpu()
	}
	s.at = time.Now()
	return s
}

// costBetween is the cost of units units of work done between two samples.
func costBetween(from, to costSample, units int64, unit string) Cost {
	used := to.sql.Sub(from.sql)
	return Cost{
		Unit: unit, Units: units, Wall: to.at.Sub(from.at),
		CPU: to.cpu - from.cpu, CPUOK: from.cpuOK && to.cpuOK,
		Statements: used.Statements, TxControl: used.TxControl, SQLOK: from.sqlOK && to.sqlOK,
		WAL: to.wal - from.wal, WALOK: from.walOK && to.walOK,
		Allocs: to.allocs - from.allocs, AllocBytes: to.allocBytes - from.allocBytes, HeapOK: from.heapOK && to.heapOK,
	}
}

// costs is a cost window running: started by startCosts, read by stop.
type costs struct {
	m    costMeter
	from costSample
}

// startCosts starts a cost window over the Adal process in this one: its CPU, statements and Go heap
// allocations, and the WAL the server writes meanwhile, read through db (a connection of the bench's).
func (b *Runner) startCosts(ctx context.Context, db *sql.DB) *costs {
	return costMeter{cpu: selfCPU, sql: b.counter, wal: walPosition(db), heap: true}.start(ctx)
}

// start starts a cost window now.
func (m costMeter) start(ctx context.Context) *costs {
	return &costs{m: m, from: m.sample(ctx)}
}

// stop ends the window: what it cost to do units units of work.
func (k *costs) stop(ctx context.Context, units int64, unit string) Cost {
	return costBetween(k.from, k.m.sample(ctx), units, unit)
}

// walPosition reads the server's WAL position, in bytes, through db.
func walPosition(db *sql.DB) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		var n int64
		err := db.QueryRowContext(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("read the WAL position: %w", err)
		}
		return n, nil
	}
}

// heapAllocs is the Go heap's allocations so far, objects and bytes. Tiny objects, which the runtime packs
// into one block, are counted one by one as MemStats.Mallocs and testing's allocs/op count them.
func heapAllocs() (objects, bytes uint64, ok bool) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/tiny/allocs:objects"},
		{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	for _, v := range s {
		if v.Value.Kind() != metrics.KindUint64 {
			return 0, 0, false
		}
	}
	return s[0].Value.Uint64() + s[1].Value.Uint64(), s[2].Value.Uint64(), true
}

// selfCPU is the user + system CPU time this process has spent, from getrusage.
func selfCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
