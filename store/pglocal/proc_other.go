//go:build unix && !linux

package pglocal

import (
	"context"
	"errors"
	"syscall"
)

// setParentDeathSignal is a no-op where the kernel has no parent-death signal; a
// server left behind is stopped by the next owner.
func setParentDeathSignal(*syscall.SysProcAttr, syscall.Signal) {}

type postmasterStatus int

const (
	postmasterGone postmasterStatus = iota
	postmasterRunning
)

// postmasterState can only ask whether the PID exists here; the server itself checks
// its lock file and shared memory again on start.
func postmasterState(pid int, _ string) postmasterStatus {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return postmasterGone
	}
	return postmasterRunning
}

func waitOrphansGone(context.Context, string) error { return nil }
