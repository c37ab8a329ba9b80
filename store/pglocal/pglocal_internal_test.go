package pglocal

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestVersionInPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		dir  string
		want int
	}{
		{name: "debian", dir: "/usr/lib/postgresql/15/bin", want: 15},
		{name: "rhel", dir: "/usr/pgsql-16/bin", want: 16},
		{name: "homebrew versioned", dir: "/opt/homebrew/opt/postgresql@17/bin", want: 17},
		{name: "homebrew unversioned", dir: "/opt/homebrew/opt/postgresql/bin", want: 0},
	}
	for _, tc := range tests {
		if got := versionInPath(tc.dir); got != tc.want {
			t.Errorf("%s: versionInPath(%q) = %d, want %d", tc.name, tc.dir, got, tc.want)
		}
	}
}

func TestSocketDirFor(t *testing.T) {
	t.Parallel()
	short := "/var/lib/gatehouse/0123456789abcdef"
	long := "/home/someone/" + strings.Repeat("x", 90) + "/gatehouse-data/postgres"
	if got := socketDirFor(short); got != short {
		t.Errorf("socketDirFor(short) = %q, want the cluster dir", got)
	}
	got := socketDirFor(long)
	if !strings.HasPrefix(got, "/tmp/gatehouse-") || len(got)+1+len(socketName) > maxSocketPath {
		t.Errorf("socketDirFor(long) = %q, want a short dir under /tmp", got)
	}
	if again := socketDirFor(long); again != got {
		t.Errorf("socketDirFor is not stable: %q then %q", got, again)
	}
}

func TestSearchable(t *testing.T) {
	t.Parallel()
	cred := &syscall.Credential{Uid: 101, Gid: 104, Groups: []uint32{7}}
	tests := []struct {
		name     string
		perm     os.FileMode
		uid, gid uint32
		want     bool
	}{
		{name: "root private", perm: 0o700, uid: 0, gid: 0, want: false},
		{name: "world searchable", perm: 0o711, uid: 0, gid: 0, want: true},
		{name: "owner", perm: 0o700, uid: 101, gid: 0, want: true},
		{name: "primary group", perm: 0o750, uid: 0, gid: 104, want: true},
		{name: "supplementary group", perm: 0o710, uid: 0, gid: 7, want: true},
		{name: "other group", perm: 0o750, uid: 0, gid: 9, want: false},
	}
	for _, tc := range tests {
		if got := searchable(tc.perm, tc.uid, tc.gid, cred); got != tc.want {
			t.Errorf("%s: searchable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestLeftBehindServerIsRestarted covers a server running with nobody holding the lock
// (its owner was killed where no parent-death signal exists): Open stops it and starts
// its own.
func TestLeftBehindServerIsRestarted(t *testing.T) {
	t.Parallel()
	c, dataDir := leftBehindServer(t)
	orphan, ok := readPostmasterPID(filepath.Join(c.pgdata, "postmaster.pid"))
	if !ok || postmasterState(orphan, c.pgdata) != postmasterRunning {
		t.Fatalf("left-behind server not running (pid %d)", orphan)
	}

	c2, err := Open(t.Context(), Options{DataDir: dataDir})
	if err != nil {
		t.Fatalf("Open over a left-behind server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c2.Close(ctx)
	})
	if got := c2.PID(); got == 0 || got == orphan {
		t.Errorf("PID() = %d, want a new server (left behind: %d)", got, orphan)
	}
	if postmasterState(orphan, c.pgdata) != postmasterGone {
		t.Errorf("left-behind server %d still running", orphan)
	}
	conn, err := pgx.Connect(t.Context(), c2.URL("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	_ = conn.Close(t.Context())
}

// TestLeftBehindServerExitingDuringStop covers a left-behind server that shuts itself
// down (its parent-death signal) between the check that finds it running and pg_ctl's
// stop, which then fails with "PID file does not exist": that is a server gone, not a
// failure to start.
func TestLeftBehindServerExitingDuringStop(t *testing.T) {
	t.Parallel()
	c, dataDir := leftBehindServer(t)
	t.Cleanup(func() { _, _ = c.run(context.Background(), c.bins.pgCtl, "stop", "-D", c.pgdata, "-m", "immediate") })

	// A pg_ctl that loses the race: the server is gone by the time it looks.
	script := filepath.Join(dataDir, "pg_ctl_racing")
	body := "#!/bin/sh\n'" + c.bins.pgCtl + "' stop -D '" + c.pgdata + "' -m fast -w >/dev/null 2>&1\n" +
		"echo 'pg_ctl: PID file does not exist' >&2\nexit 1\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	orig := c.bins.pgCtl
	c.bins.pgCtl = script
	defer func() { c.bins.pgCtl = orig }()
	if err := c.clearLeftovers(t.Context()); err != nil {
		t.Fatalf("clearLeftovers with a server that exited during the stop: %v", err)
	}
	if _, ok := readPostmasterPID(filepath.Join(c.pgdata, "postmaster.pid")); ok {
		t.Error("postmaster.pid still there after clearLeftovers")
	}
}

// TestLeftBehindServerFileGoneBeforeExit covers the same race a step later: the
// server has removed postmaster.pid (its last step of a shutdown) but its process has
// not exited yet when pg_ctl fails. That is a server on its way out: clearLeftovers
// waits for it instead of failing.
func TestLeftBehindServerFileGoneBeforeExit(t *testing.T) {
	t.Parallel()
	c, dataDir := leftBehindServer(t)
	t.Cleanup(func() { _, _ = c.run(context.Background(), c.bins.pgCtl, "stop", "-D", c.pgdata, "-m", "immediate") })
	pidFile := filepath.Join(c.pgdata, "postmaster.pid")
	pid, ok := readPostmasterPID(pidFile)
	if !ok {
		t.Fatal("no postmaster.pid for the left-behind server")
	}

	// A pg_ctl that finds the file gone: the server's own shutdown removed it and is
	// still under way (a fast-shutdown signal, not waited for).
	script := filepath.Join(dataDir, "pg_ctl_file_gone")
	body := "#!/bin/sh\nrm -f '" + pidFile + "'\nkill -INT " + strconv.Itoa(pid) + "\n" +
		"echo 'pg_ctl: PID file does not exist' >&2\nexit 1\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	orig := c.bins.pgCtl
	c.bins.pgCtl = script
	defer func() { c.bins.pgCtl = orig }()
	if err := c.clearLeftovers(t.Context()); err != nil {
		t.Fatalf("clearLeftovers with a server whose file went before its process: %v", err)
	}
	if postmasterState(pid, c.pgdata) != postmasterGone {
		t.Errorf("postmaster %d still running after clearLeftovers, want it waited for", pid)
	}
}

// OpenDir returns a new directory every user can traverse (so a root test run keeps
// the cluster inside it), removed at the end of the test. It is exported for the
// package's external tests.
func OpenDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pglocal-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// leftBehindServer opens a cluster in a new directory, closes it, and starts its
// server again behind pglocal's back (nobody holding the lock), as a killed owner
// would leave it. It returns the closed cluster and its data directory.
func leftBehindServer(t *testing.T) (*Cluster, string) {
	t.Helper()
	dataDir := OpenDir(t)
	c, err := Open(t.Context(), Options{DataDir: dataDir})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := c.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	out, err := c.run(t.Context(), c.bins.pgCtl, "start", "-w", "-D", c.pgdata, "-l", filepath.Join(c.root, "orphan.log"),
		"-o", "-c listen_addresses='' -c unix_socket_directories='"+c.socketDir+"'")
	if err != nil {
		t.Fatalf("pg_ctl start: %v: %s", err, out)
	}
	return c, dataDir
}
