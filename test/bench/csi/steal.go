package main

import (
	"os"
	"strconv"
	"strings"
)

// cpuTimes is the machine-wide "cpu" line of /proc/stat: total ticks and
// steal ticks, the time the hypervisor ran something else while this VM
// wanted to run. Steal shows up as latency spikes no driver can avoid.
type cpuTimes struct{ total, steal uint64 }

func readCPUTimes() (cpuTimes, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 9 || fields[0] != "cpu" {
		return cpuTimes{}, false
	}
	var t cpuTimes
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		if i < 8 { // guest time is already counted in user and nice
			t.total += v
		}
		if i == 7 {
			t.steal = v
		}
	}
	return t, true
}

// stealPercent is the share of CPU time stolen between two readings, or -1
// when it cannot be told.
func stealPercent(from, to cpuTimes, ok bool) float64 {
	if !ok || to.total <= from.total {
		return -1
	}
	return round(100 * float64(to.steal-from.steal) / float64(to.total-from.total))
}
