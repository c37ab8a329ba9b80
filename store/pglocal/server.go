//go:build unix

package pglocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is a running postgres child.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	err  error         // Wait's result, readable after done
}

// PID returns the postmaster's process id, or 0 when this Cluster is not running it.
func (c *Cluster) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil || c.proc.exited() {
		return 0
	}
	return c.proc.cmd.Process.Pid
}

// Start starts the server if it is not running (after Stop, or after it died) and
// waits until it accepts connections. A server left behind by a previous owner is
// stopped first; a stale postmaster.pid is removed.
func (c *Cluster) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startLocked(ctx)
}

func (c *Cluster) startLocked(ctx context.Context) error {
	if !c.owned {
		return errors.New("pglocal: start: the server belongs to another process")
	}
	if c.closed {
		return errors.New("pglocal: start: cluster is closed")
	}
	if c.proc != nil && !c.proc.exited() {
		return nil
	}
	c.proc = nil
	// From here on the server is meant to run: a supervisor retries a failed start.
	c.wantRunning = true
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := c.clearLeftovers(ctx); err != nil {
		return err
	}
	if err := c.ensureSocketDir(); err != nil {
		return err
	}
	p, err := c.spawn()
	if err != nil {
		return err
	}
	if err := waitReady(ctx, c.pgdata, p.cmd.Process.Pid, p.done); err != nil {
		_ = p.cmd.Process.Signal(syscall.SIGQUIT)
		<-p.done
		return fmt.Errorf("pglocal: start: %w\n%s", err, c.logTail())
	}
	c.proc = p
	c.startedAt = c.clock.now()
	c.notifyLocked()
	c.logger.Info("PostgreSQL started", slog.String("socket_dir", c.socketDir), slog.Int("pid", p.cmd.Process.Pid))
	return nil
}

func (c *Cluster) spawn() (*process, error) {
	logf, err := os.OpenFile(c.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pglocal: open server log: %w", err)
	}
	defer logf.Close()
	args := []string{"-D", c.pgdata,
		"-c", "listen_addresses=",
		"-c", "unix_socket_directories=" + c.socketDir,
		"-c", "unix_socket_permissions=0700",
		"-c", "max_connections=200",
	}
	if c.throwaway {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	cmd := exec.Command(c.bins.postgre, args...)
	cmd.Dir = c.root
	cmd.Env = serverEnv()
	cmd.Stdout = logf
	cmd.Stderr = logf
	// Own process group: a terminal's Ctrl-C reaches Gatehouse, which shuts down in
	// order and stops the server last. Parent death: fast shutdown (where supported).
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.runAs, Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr, syscall.SIGINT)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pglocal: start postgres: %w", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop shuts the server down (fast shutdown: sessions are ended, work is flushed) and
// waits for it to exit. If ctx ends first the server gets an immediate shutdown. The
// cluster can be started again with Start. Stop does nothing on an attached Cluster.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopLocked(ctx)
}

func (c *Cluster) stopLocked(ctx context.Context) error {
	p := c.proc
	if !c.owned {
		return nil
	}
	// Before the signal: the exit that follows is wanted, not one to restart after.
	c.wantRunning = false
	if p == nil {
		return nil
	}
	c.proc = nil
	c.notifyLocked()
	if p.exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pglocal: stop: %w", err)
	}
	select {
	case <-p.done:
		c.logger.Info("PostgreSQL stopped")
		return nil
	case <-ctx.Done():
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return fmt.Errorf("pglocal: stop: %w (immediate shutdown used)", ctx.Err())
}

func (c *Cluster) logPath() string { return filepath.Join(c.root, "postgres.log") }

// logTail returns the end of the server log for error messages.
func (c *Cluster) logTail() string {
	f, err := os.Open(c.logPath())
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 4096
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		_, _ = f.Seek(fi.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return "server log (" + c.logPath() + "):\n" + string(b)
}

// clearLeftovers deals with a postmaster.pid found before starting: a server still
// running from a previous owner is stopped; a file naming a dead (or reused) process is
// removed, after the dead postmaster's children have exited.
func (c *Cluster) clearLeftovers(ctx context.Context) error {
	pidFile := filepath.Join(c.pgdata, "postmaster.pid")
	pid, ok := readPostmasterPID(pidFile)
	if !ok {
		c.removeStaleSocketLocks()
		return nil
	}
	if postmasterState(pid, c.pgdata) == postmasterRunning {
		c.logger.Warn("stopping a PostgreSQL server left behind by a previous owner", slog.Int("pid", pid))
		out, err := c.run(ctx, c.bins.pgCtl, "stop", "-D", c.pgdata, "-m", "fast", "-w", "-t", "120")
		if err == nil {
			return nil
		}
		// A server whose owner was killed gets its parent-death signal and shuts itself
		// down: it may have exited between the check above and pg_ctl's own look at
		// postmaster.pid. Its last step is removing that file, so a file gone (or naming
		// another process) means the shutdown is done, even while the postmaster has
		// not exited yet (waitOrphansGone below waits for it). Only a server that still
		// holds its file is a failure to stop it.
		if again, held := readPostmasterPID(pidFile); held && again == pid && postmasterState(pid, c.pgdata) == postmasterRunning {
			return fmt.Errorf("pglocal: stop server left behind (pid %d): %w: %s", pid, err, bytes.TrimSpace(out))
		}
	}
	c.logger.Info("removing stale postmaster.pid", slog.Int("pid", pid))
	if err := os.Remove(pidFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pglocal: remove stale postmaster.pid: %w", err)
	}
	if err := waitOrphansGone(ctx, c.pgdata); err != nil {
		return err
	}
	c.removeStaleSocketLocks()
	return nil
}

// removeStaleSocketLocks removes the socket lock file (and socket) a dead postmaster
// left behind. Postgres checks such a file with kill(pid, 0), which succeeds for a
// zombie: where PID 1 does not reap orphans (some containers and microVMs), a killed
// server's lock would block every later start.
func (c *Cluster) removeStaleSocketLocks() {
	locks, _ := filepath.Glob(filepath.Join(c.socketDir, ".s.PGSQL.*.lock"))
	for _, lock := range locks {
		pid, ok := readPostmasterPID(lock)
		if !ok || postmasterState(pid, c.pgdata) == postmasterRunning {
			continue
		}
		c.logger.Info("removing stale socket lock", slog.String("file", lock), slog.Int("pid", pid))
		_ = os.Remove(strings.TrimSuffix(lock, ".lock"))
		_ = os.Remove(lock)
	}
}

// readPostmasterPID returns the PID on postmaster.pid's first line.
func readPostmasterPID(pidFile string) (int, bool) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// waitReady waits until postmaster.pid reports "ready" (for pid, unless pid is 0), or
// the process exits (done closes), or ctx ends.
func waitReady(ctx context.Context, pgdata string, pid int, done <-chan struct{}) error {
	pidFile := filepath.Join(pgdata, "postmaster.pid")
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(pidFile); err == nil {
			lines := strings.Split(string(b), "\n")
			// Line 1 is the PID, line 8 the status (PostgreSQL 10+).
			if len(lines) >= 8 && strings.TrimSpace(lines[7]) == "ready" &&
				(pid == 0 || strings.TrimSpace(lines[0]) == strconv.Itoa(pid)) {
				return nil
			}
		}
		select {
		case <-done:
			return errors.New("server exited during startup")
		case <-ctx.Done():
			return fmt.Errorf("server not ready: %w", ctx.Err())
		case <-tick.C:
		}
	}
}
