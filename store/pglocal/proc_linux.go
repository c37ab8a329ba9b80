package pglocal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// setParentDeathSignal asks the kernel to signal the server when Gatehouse dies, so a
// killed owner does not leave a server behind.
func setParentDeathSignal(attr *syscall.SysProcAttr, sig syscall.Signal) {
	attr.Pdeathsig = sig
}

type postmasterStatus int

const (
	postmasterGone    postmasterStatus = iota // dead, a zombie, or the PID now names another process
	postmasterRunning                         // alive and serving pgdata
)

// postmasterState tells a live postmaster of pgdata from a stale postmaster.pid. A
// postmaster's working directory is its data directory, which also catches PID reuse.
func postmasterState(pid int, pgdata string) postmasterStatus {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return postmasterGone
	}
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return postmasterGone
	}
	if cwdIs(pid, pgdata) {
		return postmasterRunning
	}
	return postmasterGone
}

func cwdIs(pid int, dir string) bool {
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return false
	}
	want, err := filepath.EvalSymlinks(dir)
	if err != nil {
		want = dir
	}
	return cwd == want
}

// waitOrphansGone waits until no process works in pgdata: the children of a killed
// postmaster exit on their own shortly after it, and until then they hold its shared
// memory and a new server would refuse to start.
func waitOrphansGone(ctx context.Context, pgdata string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		pids := processesIn(pgdata)
		if len(pids) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pglocal: processes of a previous server still running in %s: %v: %w", pgdata, pids, ctx.Err())
		case <-tick.C:
		}
	}
}

func processesIn(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if cwdIs(pid, dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}
