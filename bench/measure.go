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

// percentile returns the q-quantile (0 ≤ q ≤ 1) of d by the nearest-rank method; 0 for no samples.
func percentile(d []time.Duration, q float64) time.Duration {
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
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is VmHWM from /proc/self/status: the largest resident set of this process since the last reset. The
// bench process holds the Adal process under test, the load generator and the receiver together.
func peakRSS() int64 {
	return statusField("VmHWM:")
}

// currentRSS is VmRSS from /proc/self/status.
func currentRSS() int64 {
	return statusField("VmRSS:")
}

func statusField(name string) int64 {
	raw, err := os.ReadFile("/proc/self/status")
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
