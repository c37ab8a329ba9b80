package pglocal

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// syncBuffer is a log destination safe for the supervisor's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fakeClock records the supervisor's waits and lets them pass at once; its time moves
// only when the test says so.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waits   []time.Duration
	onAfter func(n int) // called with the number of waits so far, on the supervisor's goroutine
}

func (f *fakeClock) clock() clock {
	return clock{
		nowFn: func() time.Time {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.now
		},
		afterFn: func(d time.Duration) <-chan time.Time {
			f.mu.Lock()
			f.waits = append(f.waits, d)
			n, hook := len(f.waits), f.onAfter
			f.mu.Unlock()
			if hook != nil {
				hook(n)
			}
			ch := make(chan time.Time, 1)
			ch <- time.Time{}
			return ch
		},
	}
}

func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *fakeClock) recorded() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.waits)
}

// supervised opens a persistent cluster in a new directory with fake as its clock and
// runs Supervise until the test ends; done closes when Supervise returns.
func supervised(t *testing.T, fake *fakeClock) (c *Cluster, logs *syncBuffer, done <-chan struct{}) {
	t.Helper()
	dataDir := OpenDir(t)
	logs = &syncBuffer{}
	c, err := Open(t.Context(), Options{DataDir: dataDir, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Close(ctx)
	})
	c.clock = fake.clock()
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		c.Supervise(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-returned
	})
	return c, logs, returned
}

// waitNewServer waits until a server other than old runs and returns its PID.
func waitNewServer(t *testing.T, c *Cluster, old int, logs *syncBuffer) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if pid := c.PID(); pid != 0 && pid != old {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new server after pid %d\nlog:\n%s\n%s", old, logs, c.logTail())
		}
		time.Sleep(10 * time.Millisecond) // polling the cluster's state, not synchronisation
	}
}

func countKept(t *testing.T, c *Cluster) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), c.URL("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM kept`).Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

func execSQL(t *testing.T, c *Cluster, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), c.URL("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestSuperviseRestartsStoppedServer is issue 14's scenario: the server gets a fast
// shutdown request behind Gatehouse's back (pg_ctl stop -m fast). The supervisor logs
// the exit and starts it again, once, after the first backoff step; the data is there.
func TestSuperviseRestartsStoppedServer(t *testing.T) {
	t.Parallel()
	fake := &fakeClock{}
	c, logs, _ := supervised(t, fake)
	execSQL(t, c, `CREATE TABLE kept (n int); INSERT INTO kept VALUES (1), (2)`)
	old := c.PID()

	// -W: pg_ctl would otherwise wait for a postmaster.pid that the restarted server
	// writes again.
	if out, err := c.run(t.Context(), c.bins.pgCtl, "stop", "-D", c.pgdata, "-m", "fast", "-W"); err != nil {
		t.Fatalf("pg_ctl stop: %v: %s", err, out)
	}
	waitNewServer(t, c, old, logs)

	if got := countKept(t, c); got != 2 {
		t.Errorf("rows after the restart = %d, want 2", got)
	}
	if got, want := fake.recorded(), []time.Duration{restartMinBackoff}; !slices.Equal(got, want) {
		t.Errorf("restart waits = %v, want %v (one restart)", got, want)
	}
	for _, want := range []string{"PostgreSQL exited unexpectedly; restarting it", "exit=\"exit status 0\"", "PostgreSQL restarted"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

// TestSuperviseBackoff counts the supervisor's waits: failing starts double the wait
// from 0.5 s up to 10 s; a server that crashes again soon after a restart keeps the
// long wait; one that ran for healthyUptime starts over at 0.5 s.
func TestSuperviseBackoff(t *testing.T) {
	t.Parallel()
	fake := &fakeClock{}
	c, logs, _ := supervised(t, fake)
	execSQL(t, c, `CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)`)

	// The next starts fail (a postgres that exits at once) until the seventh attempt.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	failing := filepath.Join(dir, "postgres")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'FATAL: made to fail' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	real := c.bins.postgre
	c.bins.postgre = failing
	c.mu.Unlock()
	fake.mu.Lock()
	fake.onAfter = func(n int) {
		if n == 7 { // on the supervisor's goroutine, between two starts
			c.bins.postgre = real
		}
	}
	fake.mu.Unlock()

	pid := c.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	pid = waitNewServer(t, c, pid, logs)
	s := time.Second
	want := []time.Duration{s / 2, s, 2 * s, 4 * s, 8 * s, 10 * s, 10 * s}
	if got := fake.recorded(); !slices.Equal(got, want) {
		t.Fatalf("waits while starts fail = %v, want %v", got, want)
	}
	if n := strings.Count(logs.String(), "PostgreSQL restart failed; retrying"); n != 6 {
		t.Errorf("%d failed restarts logged, want 6:\n%s", n, logs)
	}

	// A crash right after the restart: still backing off.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	pid = waitNewServer(t, c, pid, logs)
	want = append(want, 10*s)
	if got := fake.recorded(); !slices.Equal(got, want) {
		t.Fatalf("waits after a quick crash = %v, want %v", got, want)
	}

	// A crash after a healthy run: the backoff starts over.
	fake.advance(healthyUptime)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitNewServer(t, c, pid, logs)
	want = append(want, s/2)
	if got := fake.recorded(); !slices.Equal(got, want) {
		t.Fatalf("waits after a healthy run = %v, want %v", got, want)
	}
	if got := countKept(t, c); got != 1 {
		t.Errorf("rows after three crashes = %d, want 1", got)
	}
}

// TestSuperviseLeavesStopAndClose: a server stopped by Stop or Close is not restarted;
// after Stop and Start the supervisor watches the new server.
func TestSuperviseLeavesStopAndClose(t *testing.T) {
	t.Parallel()
	fake := &fakeClock{}
	c, logs, returned := supervised(t, fake)

	if err := c.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if got := fake.recorded(); len(got) != 0 {
		t.Fatalf("Stop then Start: supervisor waited %v, want no restart", got)
	}
	pid := c.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitNewServer(t, c, pid, logs)
	if got := fake.recorded(); len(got) != 1 {
		t.Fatalf("kill after Stop/Start: waits %v, want one restart", got)
	}

	if err := c.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	<-returned // Close alone ends Supervise
	if got := fake.recorded(); len(got) != 1 {
		t.Errorf("Close: waits %v, want no further restart", got)
	}
	if _, ok := readPostmasterPID(filepath.Join(c.pgdata, "postmaster.pid")); ok {
		t.Error("a server runs after Close")
	}
	if n := strings.Count(logs.String(), "PostgreSQL exited unexpectedly"); n != 1 {
		t.Errorf("%d unexpected exits logged, want 1 (the kill):\n%s", n, logs)
	}
}
