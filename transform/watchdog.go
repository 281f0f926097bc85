package transform

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// One watchdog serves the whole process: while runs are in progress it wakes every watchEvery, stops those
// over their time or memory limit, and tells the caller of a stopped run that has not ended in time to give
// up on it. A timer and a ticker of its own for each run would cost more than a short run itself.

// allocsMetric is the process's allocations since it started, the count the memory limit is held to.
const allocsMetric = "/gc/heap/allocs:bytes"

// idleTicks is how many ticks the watchdog goes on after the last run ended before it sleeps: under load,
// runs come and go between ticks, and waking it for each would cost more than its ticks do.
const idleTicks = 100

// slot is one of the places for a run in progress, one per CPU the process may use.
type slot struct {
	mu  sync.Mutex
	run *watched // nil while no run is watched here
}

// watched is a run as the watchdog sees it. The worker keeps one and fills it for each of its runs.
type watched struct {
	s      *sandbox
	start  time.Time
	cpu    time.Duration
	memory uint64
	base   uint64 // the process's allocations when the run started
	// stoppedAt is when the watchdog first saw the run stopped, zero before.
	stoppedAt time.Time
	// stuck gets a value when the run was stopped and has not ended in time. A worker whose run was
	// stopped is never used again, so a value left here reaches no later run.
	stuck  chan struct{}
	sample []metrics.Sample
}

var (
	slots = make([]slot, runtime.GOMAXPROCS(0))
	// cpus holds the indexes of the free slots: a run takes one to start and gives it back when it ends.
	cpus = func() chan int {
		c := make(chan int, len(slots))
		for i := range slots {
			c <- i
		}
		return c
	}()
	watching  atomic.Int32 // runs in progress
	wake      = make(chan struct{}, 1)
	watchOnce sync.Once
)

func newWatched(s *sandbox) watched {
	return watched{s: s, stuck: make(chan struct{}, 1), sample: []metrics.Sample{{Name: allocsMetric}}}
}

// begin starts the clock and the allocation count of a run about to go in slot sl.
func (sl *slot) begin(w *watched, lim Limits) {
	metrics.Read(w.sample)
	w.base = w.sample[0].Value.Uint64()
	w.start, w.cpu, w.memory, w.stoppedAt = time.Now(), lim.CPU, uint64(lim.Memory), time.Time{}
	sl.mu.Lock()
	sl.run = w
	sl.mu.Unlock()
	if watching.Add(1) == 1 {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	watchOnce.Do(func() { go watchdog() })
}

// end takes the run out of the watchdog's sight: once it returns, the watchdog no longer stops it.
func (sl *slot) end() {
	sl.mu.Lock()
	sl.run = nil
	sl.mu.Unlock()
	watching.Add(-1)
}

func watchdog() {
	sample := []metrics.Sample{{Name: allocsMetric}}
	tick := time.NewTicker(watchEvery)
	tick.Stop()
	for range wake {
		tick.Reset(watchEvery)
		for idle := 0; idle < idleTicks; {
			<-tick.C
			if watching.Load() == 0 {
				idle++
				continue
			}
			idle = 0
			metrics.Read(sample)
			allocs, now := sample[0].Value.Uint64(), time.Now()
			for i := range slots {
				slots[i].check(now, allocs)
			}
		}
		tick.Stop()
	}
}

func (sl *slot) check(now time.Time, allocs uint64) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	w := sl.run
	if w == nil {
		return
	}
	s := w.s
	if s.stopped.Load() == nil {
		switch {
		case now.Sub(w.start) > w.cpu:
			s.stop(&Error{Reason: ReasonTimeout, Message: "the transform ran over its time limit of " + w.cpu.String()})
		case allocs > w.base && allocs-w.base > w.memory:
			s.stop(&Error{Reason: ReasonMemory, Message: "the transform allocated over its memory limit of " + formatBytes(int64(w.memory))})
		}
	}
	if s.stopped.Load() == nil {
		return
	}
	if w.stoppedAt.IsZero() {
		w.stoppedAt = now
	} else if now.Sub(w.stoppedAt) >= max(w.cpu, minStuckAfter) {
		select {
		case w.stuck <- struct{}{}:
		default:
		}
	}
}
