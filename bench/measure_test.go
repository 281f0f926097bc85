package bench

import (
	"slices"
	"testing"
	"time"
)

// TestMachineBusyCountsWhatIsNotIdle: user, nice, system, irq, softirq and steal are busy, and steal is also
// read apart; idle, iowait and the guest columns (already in user) are not; a line that is not the all-CPU one
// reads as unknown.
func TestMachineBusyCountsWhatIsNotIdle(t *testing.T) {
	//           user nice system idle   iowait irq softirq steal guest guest_nice
	stat := "cpu  1000 20   300    900000 5000   7   80      3     400   0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
	got, steal, ok := machineBusy([]byte(stat))
	if !ok || got != time.Duration(1000+20+300+7+80+3)*10*time.Millisecond || steal != 30*time.Millisecond {
		t.Fatalf("busy %v, steal %v, %v", got, steal, ok)
	}
	if _, _, ok := machineBusy([]byte("intr 1 2 3 4 5 6 7 8 9\n")); ok {
		t.Fatal("a line that is not the cpu line was read")
	}
	if _, _, ok := machineBusy([]byte("cpu 1 2 x 4 5 6 7 8\n")); ok {
		t.Fatal("a counter that is not a number was read")
	}
}

// TestCoresBusy: the CPU spent between two readings over the wall time between them, for the machine and the
// bench process (Adal) and the traffic process; nothing when the machine's counters could not be read, and no
// traffic figure when its process's could not.
func TestCoresBusy(t *testing.T) {
	t0 := time.Unix(0, 0)
	from := cpuReading{at: t0, machineBusy: 10 * time.Second, machineSteal: time.Second, processCPU: time.Second,
		trafficCPU: 2 * time.Second, machineOK: true, pOK: true, tOK: true}
	to := cpuReading{at: t0.Add(4 * time.Second), machineBusy: 16 * time.Second, machineSteal: 1400 * time.Millisecond,
		processCPU: 3 * time.Second, trafficCPU: 3 * time.Second, machineOK: true, pOK: true, tOK: true}
	if got := coresBusy(from, to); got != "1.50 (Adal 0.50, traffic 0.25), stolen 0.10" {
		t.Fatalf("got %q", got)
	}
	to.tOK = false
	if got := coresBusy(from, to); got != "1.50 (Adal 0.50), stolen 0.10" {
		t.Fatalf("got %q with the traffic process gone", got)
	}
	to.machineOK = false
	if got := coresBusy(from, to); got != "" {
		t.Fatalf("got %q from an unreadable /proc/stat", got)
	}
}

// TestLoadResultBySecond: answers are grouped by the second their request was scheduled in, whatever their
// status, counted from the run's start.
func TestLoadResultBySecond(t *testing.T) {
	t0 := time.Unix(100, 0)
	r := LoadResult{Start: t0, Requests: []Sent{
		{Scheduled: t0, Latency: time.Millisecond, Status: 202},
		{Scheduled: t0.Add(999 * time.Millisecond), Latency: 2 * time.Millisecond, Status: 503},
		{Scheduled: t0.Add(time.Second), Latency: 3 * time.Millisecond, Status: 0},
		{Scheduled: t0.Add(2500 * time.Millisecond), Latency: 4 * time.Millisecond, Status: 202},
	}}
	got := r.BySecond()
	want := map[int][]time.Duration{0: {time.Millisecond, 2 * time.Millisecond}, 1: {3 * time.Millisecond}, 2: {4 * time.Millisecond}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for sec, w := range want {
		if !slices.Equal(got[sec], w) {
			t.Fatalf("second %d: got %v, want %v", sec, got[sec], w)
		}
	}
}
