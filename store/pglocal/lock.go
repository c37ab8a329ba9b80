//go:build unix

package pglocal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// LockFile is the name of the lock held by the process that owns a data dir's server.
const LockFile = "gatehouse.lock"

var errLockHeld = errors.New("pglocal: lock held")

// lockGrace is how long tryLockSettled retries a held lock: a lock just
// released can still be held for a moment by a child forked elsewhere in this
// process, whose copy of the descriptor lives until its exec closes it.
const lockGrace = 500 * time.Millisecond

// tryLockSettled is tryLock, retried for lockGrace while the lock is held, so
// that a lock this process has just given back is not taken for another
// owner's. A real owner holds it for as long as it runs.
func tryLockSettled(dataDir string) (*os.File, error) {
	deadline := time.Now().Add(lockGrace)
	for {
		f, err := tryLock(dataDir)
		if !errors.Is(err, errLockHeld) || time.Now().After(deadline) {
			return f, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tryLock takes an exclusive flock on <dataDir>/gatehouse.lock without waiting. The
// lock lasts until the returned file is closed or the process dies; the descriptor is
// close-on-exec, so the server never inherits it.
func tryLock(dataDir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dataDir, LockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pglocal: open lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLockHeld
		}
		return nil, fmt.Errorf("pglocal: lock %s: %w", dataDir, err)
	}
	return f, nil
}

// Locked reports whether another process holds dataDir's lock (a running serve owns
// its managed server).
func Locked(dataDir string) (bool, error) {
	f, err := tryLock(dataDir)
	if errors.Is(err, errLockHeld) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, f.Close()
}
