//go:build unix

package pglocal

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Restart backoff of Supervise: the first restart waits restartMinBackoff, each one
// after it twice as long up to restartMaxBackoff. A server that ran for healthyUptime
// before it exited starts the sequence over: it was not crashing in a loop.
const (
	restartMinBackoff = 500 * time.Millisecond
	restartMaxBackoff = 10 * time.Second
	healthyUptime     = 30 * time.Second
)

// clock is the supervisor's time; the zero value is the real clock. Tests replace it
// to count restarts and their delays without waiting for them.
type clock struct {
	nowFn   func() time.Time
	afterFn func(time.Duration) <-chan time.Time
}

func (k clock) now() time.Time {
	if k.nowFn != nil {
		return k.nowFn()
	}
	return time.Now()
}

func (k clock) after(d time.Duration) <-chan time.Time {
	if k.afterFn != nil {
		return k.afterFn(d)
	}
	return time.After(d)
}

// errNotWanted stops a restart: Stop or Close was called since the server exited.
var errNotWanted = errors.New("pglocal: the server is not meant to run")

// notifyLocked wakes a supervisor waiting for the server process to change.
func (c *Cluster) notifyLocked() {
	if c.changed != nil {
		close(c.changed)
	}
	c.changed = make(chan struct{})
}

// Supervise keeps the server running until ctx ends or the cluster is closed: when the
// postmaster exits on its own (a crash, a kill, a pg_ctl stop behind Gatehouse's back),
// it logs that and starts the server again with Start, waiting 0.5 s before the first
// attempt and doubling the wait after each one up to 10 s. The socket and URL stay the
// same, so connection pools reconnect by themselves once the server is back. An exit
// caused by Stop or Close is not restarted. Supervise returns at once on an attached
// cluster (the server belongs to another process). Run at most one per Cluster.
func (c *Cluster) Supervise(ctx context.Context) {
	if !c.owned {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Close cancels a restart in progress (it needs the lock that Start holds).
	go func() {
		select {
		case <-c.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	delay := restartMinBackoff
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		p, changed := c.proc, c.changed
		c.mu.Unlock()
		var exited <-chan struct{}
		if p != nil {
			exited = p.done
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
			continue
		case <-exited:
		}
		uptime, unexpected := c.exitedOnItsOwn(p)
		if !unexpected {
			continue
		}
		if uptime >= healthyUptime {
			delay = restartMinBackoff
		}
		exit := "exit status 0"
		if p.err != nil {
			exit = p.err.Error()
		}
		c.logger.Error("PostgreSQL exited unexpectedly; restarting it",
			slog.Int("pid", p.cmd.Process.Pid), slog.String("exit", exit),
			slog.Duration("uptime", uptime.Round(time.Millisecond)), slog.Duration("retry_in", delay),
			slog.String("server_log", c.logPath()))
		if !c.restartWithBackoff(ctx, &delay) {
			return
		}
	}
}

// exitedOnItsOwn reports whether the exited process p is still the cluster's server
// and meant to run (no Stop or Close since), and how long it had been ready.
func (c *Cluster) exitedOnItsOwn(p *process) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.wantRunning || c.proc != p {
		return 0, false
	}
	return c.clock.now().Sub(c.startedAt), true
}

// restartWithBackoff starts the server again, waiting *delay before each attempt and
// doubling *delay (up to restartMaxBackoff) after it. It returns false when ctx ends.
func (c *Cluster) restartWithBackoff(ctx context.Context, delay *time.Duration) bool {
	for attempt := 1; ; attempt++ {
		select {
		case <-ctx.Done():
			return false
		case <-c.clock.after(*delay):
		}
		*delay = min(2**delay, restartMaxBackoff)
		err := c.restart(ctx)
		switch {
		case err == nil:
			c.logger.Info("PostgreSQL restarted", slog.Int("attempt", attempt), slog.Int("pid", c.PID()))
			return true
		case errors.Is(err, errNotWanted):
			return true
		case ctx.Err() != nil:
			return false
		}
		c.logger.Warn("PostgreSQL restart failed; retrying", slog.Int("attempt", attempt),
			slog.Any("error", err), slog.Duration("retry_in", *delay))
	}
}

// restart starts the server unless Stop or Close came first (errNotWanted).
func (c *Cluster) restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.wantRunning {
		return errNotWanted
	}
	return c.startLocked(ctx)
}
