package pglocal_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/gatehouse-dev/gatehouse/store/pglocal"
)

// ownerDirEnv makes the test binary act as a cluster owner (see runOwner).
const ownerDirEnv = "PGLOCAL_TEST_OWNER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(ownerDirEnv); dir != "" {
		os.Exit(runOwner(dir))
	}
	goleak.VerifyTestMain(m)
}

// runOwner opens the persistent cluster in dir, says "ready" and holds it until
// stdin closes (or the process is killed).
func runOwner(dir string) int {
	ctx := context.Background()
	c, err := pglocal.Open(ctx, pglocal.Options{DataDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("ready %d\n", c.PID())
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := c.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// openDir is OpenDir (pglocal_internal_test.go).
var openDir = pglocal.OpenDir

func open(t *testing.T, opts pglocal.Options) *pglocal.Cluster {
	t.Helper()
	c, err := pglocal.Open(t.Context(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func connect(t *testing.T, c *pglocal.Cluster) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), c.URL("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func exec1(t *testing.T, c *pglocal.Cluster, sql string) {
	t.Helper()
	conn := connect(t, c)
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	_ = conn.Close(t.Context())
}

func countRows(t *testing.T, c *pglocal.Cluster) int {
	t.Helper()
	conn := connect(t, c)
	defer conn.Close(t.Context())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM kept`).Scan(&n); err != nil {
		t.Fatalf("count rows: %v", err)
	}
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

func TestThrowaway(t *testing.T) {
	t.Parallel()
	c, err := pglocal.Open(t.Context(), pglocal.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	conn, err := pgx.Connect(t.Context(), c.URL("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	var one int
	var user string
	if err := conn.QueryRow(t.Context(), `SELECT 1, current_user`).Scan(&one, &user); err != nil || one != 1 || user != pglocal.Superuser {
		t.Errorf("SELECT 1, current_user = %d, %q, %v; want 1, %q", one, user, err, pglocal.Superuser)
	}
	var listen string
	if err := conn.QueryRow(t.Context(), `SHOW listen_addresses`).Scan(&listen); err != nil || listen != "" {
		t.Errorf("listen_addresses = %q, %v; want empty (no TCP)", listen, err)
	}
	_ = conn.Close(t.Context())
	if err := c.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(c.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("throwaway dir %s still there after Close (stat: %v)", c.Dir(), err)
	}
}

func TestPersistentKeepsData(t *testing.T) {
	t.Parallel()
	private := t.TempDir() // mode 0700: root's postgres user cannot enter it (nor data, which Open creates 0700)
	fallback := openDir(t)
	long := filepath.Join(openDir(t), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(long, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		dataDir       string
		wantFallback  bool // cluster under FallbackDir (root only)
		wantShortSock bool
	}{
		{name: "reachable data dir", dataDir: openDir(t)},
		{name: "private data dir", dataDir: filepath.Join(private, "data"), wantFallback: os.Geteuid() == 0},
		{name: "long path", dataDir: long, wantShortSock: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := pglocal.Options{DataDir: tc.dataDir, FallbackDir: fallback}
			c, err := pglocal.Open(t.Context(), opts)
			if err != nil {
				t.Fatalf("first Open: %v", err)
			}
			exec1(t, c, `CREATE TABLE kept (n int); INSERT INTO kept VALUES (1), (2)`)
			if err := c.Close(t.Context()); err != nil {
				t.Fatalf("Close: %v", err)
			}

			c = open(t, opts)
			if got := countRows(t, c); got != 2 {
				t.Errorf("rows after restart = %d, want 2", got)
			}
			if got := strings.HasPrefix(c.Dir(), fallback+"/"); got != tc.wantFallback {
				t.Errorf("cluster dir %s under fallback %s = %v, want %v", c.Dir(), fallback, got, tc.wantFallback)
			}
			if got := c.SocketDir() != c.Dir(); got != tc.wantShortSock {
				t.Errorf("socket dir %s separate from cluster dir = %v, want %v", c.SocketDir(), got, tc.wantShortSock)
			}
			recorded, err := os.ReadFile(filepath.Join(tc.dataDir, "cluster-location"))
			if err != nil || strings.TrimSpace(string(recorded)) != c.Dir() {
				t.Errorf("cluster-location = %q, %v; want %q", recorded, err, c.Dir())
			}
			fi, err := os.Stat(c.SocketDir())
			if err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("socket dir mode = %v, %v; want 0700", fi.Mode().Perm(), err)
			}
		})
	}
}

func TestKilledPostmasterRecovers(t *testing.T) {
	t.Parallel()
	c := open(t, pglocal.Options{DataDir: openDir(t)})
	exec1(t, c, `CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)`)

	pid := c.PID()
	if pid == 0 {
		t.Fatal("PID() = 0 for a running cluster")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	waitFor(t, "the postmaster to die", func() bool { return c.PID() == 0 })

	if err := c.Start(t.Context()); err != nil {
		t.Fatalf("Start after kill -9: %v", err)
	}
	if got := countRows(t, c); got != 1 {
		t.Errorf("rows after crash recovery = %d, want 1", got)
	}
}

func TestKilledOwnerReleasesCluster(t *testing.T) {
	t.Parallel()
	dir := openDir(t)
	owner := exec.Command(os.Args[0], "-test.run=^$")
	owner.Env = append(os.Environ(), ownerDirEnv+"="+dir)
	stdin, err := owner.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := owner.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	owner.Stderr = os.Stderr
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = owner.Process.Kill()
		_ = owner.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if !strings.HasPrefix(line, "ready ") {
		t.Fatalf("owner said %q, %v; want ready", line, err)
	}

	if held, err := pglocal.Locked(dir); err != nil || !held {
		t.Fatalf("Locked while the owner runs = %v, %v; want true", held, err)
	}
	if _, err := pglocal.Open(t.Context(), pglocal.Options{DataDir: dir}); !errors.Is(err, pglocal.ErrLocked) {
		t.Fatalf("Open without Attach = %v, want ErrLocked", err)
	}
	attached, err := pglocal.Open(t.Context(), pglocal.Options{DataDir: dir, Attach: true})
	if err != nil {
		t.Fatalf("Open with Attach: %v", err)
	}
	if attached.Owned() {
		t.Error("attached cluster reports Owned")
	}
	attached.Supervise(t.Context()) // returns at once: the owner's server is not ours to restart
	exec1(t, attached, `CREATE TABLE kept (n int); INSERT INTO kept VALUES (1)`)
	if err := attached.Close(t.Context()); err != nil {
		t.Fatalf("Close attached: %v", err)
	}
	if got := countRows(t, attached); got != 1 {
		t.Errorf("rows through the owner's server after closing the attachment = %d, want 1", got)
	}

	if err := owner.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = owner.Wait()

	c := open(t, pglocal.Options{DataDir: dir})
	if !c.Owned() {
		t.Error("Open after the owner was killed did not take ownership")
	}
	if got := countRows(t, c); got != 1 {
		t.Errorf("rows after taking over = %d, want 1", got)
	}
}

func TestNoBinaries(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	tests := []struct {
		name string
		opts pglocal.Options
	}{
		{name: "throwaway", opts: pglocal.Options{BinDir: empty}},
		{name: "persistent", opts: pglocal.Options{BinDir: empty, DataDir: filepath.Join(t.TempDir(), "data"), FallbackDir: openDir(t)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := pglocal.Open(t.Context(), tc.opts)
			if !errors.Is(err, pglocal.ErrNoBinaries) {
				if c != nil {
					_ = c.Close(t.Context())
				}
				t.Fatalf("Open = %v, want ErrNoBinaries", err)
			}
			if want := "no PostgreSQL server binaries found (initdb, pg_ctl, postgres): install PostgreSQL (e.g. apt-get install postgresql) or set GATEHOUSE_DATABASE_URL"; err.Error() != want {
				t.Errorf("message = %q, want %q", err, want)
			}
		})
	}
}
