package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It is
// 100 on every Linux architecture Go supports (the kernel fixes it for the
// user ABI), so CPU readings have a 10 ms granularity: runs must be long
// enough to spend well over that.
const clockTick = 10 * time.Millisecond

// procStat is the part of /proc/<pid>/stat the harness uses.
type procStat struct {
	ppid int
	// cpu is utime+stime: the process's own CPU time, all threads.
	cpu time.Duration
	// childCPU is cutime+cstime: CPU of children that exited and were waited for.
	childCPU time.Duration
}

// readStat parses /proc/<pid>/stat. The command name (field 2) may contain
// spaces and parentheses, so fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, fmt.Errorf("bench: read stat of %d: %w", pid, err)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("bench: malformed /proc/%d/stat", pid)
	}
	// After ')': state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("bench: short /proc/%d/stat", pid)
	}
	num := func(k int) int64 {
		n, _ := strconv.ParseInt(f[k-3], 10, 64)
		return n
	}
	return procStat{
		ppid:     int(num(4)),
		cpu:      time.Duration(num(14)+num(15)) * clockTick,
		childCPU: time.Duration(num(16)+num(17)) * clockTick,
	}, nil
}

// processCPU returns utime+stime of pid.
func processCPU(pid int) (time.Duration, error) {
	st, err := readStat(pid)
	return st.cpu, err
}

// descendantsCPU returns the CPU time of every live descendant of pid (for
// Gatehouse: the managed Postgres and its backends), including what they
// reaped from children that exited. Processes that vanish mid-walk are skipped.
func descendantsCPU(pid int) time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	parent := map[int]int{}
	stats := map[int]procStat{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(p)
		if err != nil {
			continue
		}
		parent[p] = st.ppid
		stats[p] = st
	}
	var total time.Duration
	for p, st := range stats {
		for a := parent[p]; a > 1; a = parent[a] {
			if a == pid {
				total += st.cpu + st.childCPU
				break
			}
		}
	}
	return total
}

// memStatus is the memory part of /proc/<pid>/status, in bytes.
type memStatus struct {
	RSS int64 // VmRSS: resident now
	HWM int64 // VmHWM: peak resident since start or the last clear_refs reset
}

// readMem parses VmRSS and VmHWM from /proc/<pid>/status.
func readMem(pid int) (memStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memStatus{}, fmt.Errorf("bench: read status of %d: %w", pid, err)
	}
	var m memStatus
	for line := range strings.SplitSeq(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		f := strings.Fields(rest) // "12345 kB"
		if len(f) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return memStatus{}, fmt.Errorf("bench: parse %s of %d: %w", name, pid, err)
		}
		if name == "VmRSS" {
			m.RSS = kb * 1024
		} else {
			m.HWM = kb * 1024
		}
	}
	return m, nil
}

// resetPeakRSS resets VmHWM of pid to its current RSS (Linux 4.0+, "5" to
// clear_refs). It needs the right to write the file; failure only means the
// sampled peak is used alone.
func resetPeakRSS(pid int) error {
	return os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "clear_refs"), []byte("5"), 0)
}

// loadAverage returns the first field of /proc/loadavg, or -1.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// megabytes converts bytes to MB (10^6 bytes, the unit of the targets).
func megabytes(b int64) float64 {
	return float64(b) / 1e6
}
