package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"
)

// Percentile returns the q-quantile (0 ≤ q ≤ 1) of d by the nearest-rank method; 0 for no samples.
func Percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + " ms"
}

// resetPeakRSS starts a new peak-RSS window for the scenario about to run: the kernel forgets the high-water
// mark when "5" is written to /proc/self/clear_refs (Linux ≥ 4.0). It reports false where that is not
// possible; the peak then covers the process's whole life.
func resetPeakRSS() bool {
	runtime.GC()
	return clearPeakRSS("self")
}

// clearPeakRSS starts a new peak-RSS window for process pid ("self": this one), as resetPeakRSS does; the
// cluster scenario's cmd/server processes are the bench's children, whose clear_refs it may write.
func clearPeakRSS(pid string) bool {
	return os.WriteFile("/proc/"+pid+"/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is VmHWM from /proc/self/status: the largest resident set of this process since the last reset. The
// bench process holds the Adal process under test and the bench's own bookkeeping; the load generator and the
// receiver are in the traffic process.
func peakRSS() int64 {
	return statusField("/proc/self/status", "VmHWM:")
}

// currentRSS is VmRSS from /proc/self/status.
func currentRSS() int64 {
	return statusField("/proc/self/status", "VmRSS:")
}

// statusField is a size field (name with its colon) of a /proc/<pid>/status file, in bytes; 0 if unreadable.
func statusField(file, name string) int64 {
	raw, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(name)) {
			continue
		}
		f := bytes.Fields(line[len(name):])
		if len(f) == 0 {
			return 0
		}
		kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
		return kb * 1024
	}
	return 0
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// loadAverage is the 1-minute load average of the machine: the bench shares it with whatever else runs.
func loadAverage() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := bytes.Fields(raw)
	if len(f) == 0 {
		return -1
	}
	v, _ := strconv.ParseFloat(string(f[0]), 64)
	return v
}

// cpuReading is the CPU time spent so far by the whole machine, by this process and by the traffic process.
type cpuReading struct {
	at                  time.Time
	machineBusy         time.Duration // all CPUs, everything but idle and I/O wait: PostgreSQL's share included
	machineSteal        time.Duration // of which the hypervisor gave to other guests
	processCPU          time.Duration // the bench process: Adal under test
	trafficCPU          time.Duration // the load generator and the receiver
	machineOK, pOK, tOK bool
}

// readCPU reads the CPU time spent so far; traffic, when not nil, is the scenario's traffic process.
func readCPU(traffic *Traffic) cpuReading {
	r := cpuReading{at: time.Now()}
	if traffic != nil && !traffic.closed {
		r.trafficCPU, r.tOK = processCPU(traffic.Pid())
	}
	if raw, err := os.ReadFile("/proc/stat"); err == nil {
		r.machineBusy, r.machineSteal, r.machineOK = machineBusy(raw)
	}
	r.processCPU, r.pOK = selfCPU()
	return r
}

// after moves reading r forward by the span between the readings from and to, as if that span had never been:
// the cores busy from r on are then those of the time outside the span.
func (r cpuReading) after(from, to cpuReading) cpuReading {
	r.at = r.at.Add(to.at.Sub(from.at))
	r.machineBusy += to.machineBusy - from.machineBusy
	r.machineSteal += to.machineSteal - from.machineSteal
	r.processCPU += to.processCPU - from.processCPU
	r.trafficCPU += to.trafficCPU - from.trafficCPU
	r.machineOK = r.machineOK && from.machineOK && to.machineOK
	r.pOK = r.pOK && from.pOK && to.pOK
	r.tOK = r.tOK && from.tOK && to.tOK
	return r
}

// userHZ is the unit of /proc/stat's counters: USER_HZ, 100 on every Linux ABI in use.
const userHZ = 100

// machineBusy reads the busy time of all CPUs from the "cpu" line of /proc/stat: user, nice, system, irq,
// softirq and steal (idle and iowait are not busy; guest time is already counted in user), and steal apart:
// time the virtual CPUs had work for and the hypervisor ran another guest instead.
func machineBusy(stat []byte) (busy, steal time.Duration, ok bool) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0, 0, false
	}
	var ticks, stolen int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system [idle iowait] irq softirq steal
		v, err := strconv.ParseInt(string(f[i]), 10, 64)
		if err != nil {
			return 0, 0, false
		}
		ticks += v
		if i == 8 {
			stolen = v
		}
	}
	return time.Duration(ticks) * time.Second / userHZ, time.Duration(stolen) * time.Second / userHZ, true
}

// coresBusy describes the CPU spent between two readings as cores kept busy on average: the machine's, Adal's
// (the bench process), the traffic process's, and how much of the machine's was stolen by the hypervisor. With
// the same offered load, fewer is cheaper; it is steadier between runs than a tail latency. Steal is not the
// system's own work but makes it slower: a run with much of it measured a busier host, not a costlier build.
func coresBusy(from, to cpuReading) string {
	wall := to.at.Sub(from.at)
	if wall <= 0 || !from.machineOK || !to.machineOK {
		return ""
	}
	s := fmt.Sprintf("%.2f", float64(to.machineBusy-from.machineBusy)/float64(wall))
	if from.pOK && to.pOK {
		s += fmt.Sprintf(" (Adal %.2f", float64(to.processCPU-from.processCPU)/float64(wall))
		if from.tOK && to.tOK {
			s += fmt.Sprintf(", traffic %.2f", float64(to.trafficCPU-from.trafficCPU)/float64(wall))
		}
		s += ")"
	}
	return s + fmt.Sprintf(", stolen %.2f", float64(to.machineSteal-from.machineSteal)/float64(wall))
}
