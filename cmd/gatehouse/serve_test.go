package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store/pglocal"
)

// proc is a gatehouse process started by a test.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string
	stdout *lockedBuffer
	stderr *lockedBuffer
	done   chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// nextPort walks the ports below the kernel's ephemeral range (32768 and up on Linux),
// starting at an offset drawn from the process id. The kernel never hands these ports to
// a listener on :0 or to an outgoing connection, and this process never picks one twice,
// so a port chosen here cannot be taken by a parallel test between the check and the
// child's bind — the race that picking a port with :0 and closing it had.
var nextPort atomic.Int64

func init() { nextPort.Store(int64(os.Getpid()*97) % 12000) }

// freeAddr returns a loopback address with a port that is free now and that no other test
// of this process will be given.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 12000 {
		port := 20000 + nextPort.Add(1)%12000
		addr := net.JoinHostPort("127.0.0.1", strconv.FormatInt(port, 10))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		_ = ln.Close()
		return addr
	}
	t.Fatal("no free port in 20000-31999")
	return ""
}

// testEnv is the environment for a gatehouse child: only what the test sets, plus PATH.
func testEnv(dataDir, addr string, extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.TempDir(),
		"GATEHOUSE_DATA_DIR=" + dataDir,
		"GATEHOUSE_ADDR=" + addr,
		"GATEHOUSE_LOG_LEVEL=info",
	}
	return append(env, extra...)
}

// startServe starts gatehouse serve with args and waits until /readyz answers 200. A child
// that finds its address taken by a process outside this test run is started again on
// another address.
func startServe(t *testing.T, dataDir string, cred *syscall.Credential, env []string, args ...string) *proc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p := launchServe(t, dataDir, cred, env, args...)
		if !p.pollStatus(t, "/healthz", http.StatusOK, 90*time.Second) {
			if attempt < 3 && strings.Contains(p.stderr.String(), "address already in use") {
				continue
			}
			t.Fatalf("gatehouse exited before /healthz answered 200\nstdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
		}
		p.waitStatus(t, "/readyz", http.StatusOK, 30*time.Second)
		return p
	}
}

// launchServe starts gatehouse serve on a fresh address and stops it at cleanup.
func launchServe(t *testing.T, dataDir string, cred *syscall.Credential, env []string, args ...string) *proc {
	t.Helper()
	addr := freeAddr(t)
	p := &proc{t: t, addr: addr, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binPath, append([]string{"serve"}, args...)...)
	p.cmd.Env = append(testEnv(dataDir, addr), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if cred != nil {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.done:
			case <-time.After(20 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
	})
	return p
}

// waitStatus polls path until it answers want, failing if the child exits or after timeout.
func (p *proc) waitStatus(t *testing.T, path string, want int, timeout time.Duration) {
	t.Helper()
	if !p.pollStatus(t, path, want, timeout) {
		t.Fatalf("gatehouse exited before %s answered %d\nstdout:\n%s\nstderr:\n%s", path, want, p.stdout, p.stderr)
	}
}

// pollStatus polls path until it answers want (true) or the child exits (false), failing
// the test after timeout.
func (p *proc) pollStatus(t *testing.T, path string, want int, timeout time.Duration) bool {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := "no answer"
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return false
		default:
		}
		resp, err := client.Get("http://" + p.addr + path)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == want {
				return true
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		<-tick.C
	}
	t.Fatalf("%s did not answer %d within %s (last: %s)\nstderr:\n%s", path, want, timeout, last, p.stderr)
	return false
}

// interrupt sends SIGINT and waits for exit within limit.
func (p *proc) interrupt(t *testing.T, limit time.Duration) {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("gatehouse did not stop within %s of SIGINT\nstderr:\n%s", limit, p.stderr)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("gatehouse exited with %d after SIGINT\nstderr:\n%s", code, p.stderr)
	}
}

// postmasterPID reads the PID of the data dir's managed Postgres, 0 when none runs.
func postmasterPID(t *testing.T, dataDir string) int {
	t.Helper()
	loc, err := os.ReadFile(filepath.Join(dataDir, "cluster-location"))
	if err != nil {
		t.Fatalf("cluster location: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(loc)), "data", "postmaster.pid"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	return pid
}

// alive reports whether pid is a live process; a zombie waiting to be reaped by init
// does not count.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// runCLI runs a gatehouse subcommand to completion and returns its stdout.
func runCLI(t *testing.T, dataDir string, cred *syscall.Credential, stdin string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(testEnv(dataDir, freeAddr(t)), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := cmd.Run(); err != nil {
		t.Fatalf("gatehouse %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// privateDir returns a new directory removed at cleanup, owned by cred's user when set.
func privateDir(t *testing.T, cred *syscall.Credential) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gatehouse-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	t.Cleanup(func() {
		removeFallbackCluster(t, data)
		_ = os.RemoveAll(dir)
	})
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

// removeFallbackCluster deletes the managed cluster of dataDir when pglocal put it
// under pglocal.DefaultFallbackDir (as root, the postgres user cannot reach a private
// temp dir), so that test runs leave no clusters behind. It runs after the processes
// using it have stopped (cleanups run last-registered first).
func removeFallbackCluster(t *testing.T, dataDir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "cluster-location"))
	if err != nil {
		return // no cluster, or it lives in the data dir
	}
	loc := filepath.Clean(strings.TrimSpace(string(b)))
	if filepath.Dir(loc) != filepath.Clean(pglocal.DefaultFallbackDir) {
		return
	}
	if err := os.RemoveAll(loc); err != nil {
		t.Errorf("remove the test's cluster %s: %v", loc, err)
	}
}

// TestServeLifecycle: the README's run command comes up, stops on SIGINT with its
// Postgres, keeps its data across a restart, and serves CLI commands while running.
func TestServeLifecycle(t *testing.T) {
	t.Parallel()
	testLifecycle(t, nil)
}

// TestServeUnprivileged runs the same lifecycle as an unprivileged user (when the test
// runs as root; otherwise TestServeLifecycle already is that case).
func TestServeUnprivileged(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("already unprivileged: TestServeLifecycle covers this case")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("look up nobody: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	testLifecycle(t, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)})
}

func testLifecycle(t *testing.T, cred *syscall.Credential) {
	dataDir := privateDir(t, cred)
	env := []string{"GATEHOUSE_ADMIN_PASSWORD=correct horse battery"}
	p := startServe(t, dataDir, cred, env, "--demo")
	if !strings.Contains(p.stdout.String(), "admin@localhost") {
		t.Fatalf("serve --demo did not print the admin; stdout:\n%s", p.stdout)
	}
	pgPID := postmasterPID(t, dataDir)
	if !alive(pgPID) {
		t.Fatalf("managed postgres (pid %d) is not running", pgPID)
	}

	// CLI commands attach to the running server's Postgres.
	runCLI(t, dataDir, cred, "s3cret-viewer-password\n", nil, "user", "add", "--email", "viewer@example.com", "--role", "viewer")
	list := runCLI(t, dataDir, cred, "", nil, "user", "list")
	for _, want := range []string{"admin@localhost", "viewer@example.com"} {
		if !strings.Contains(list, want) {
			t.Fatalf("user list while serving lacks %s:\n%s", want, list)
		}
	}

	// A client key printed by "key create" works on the very next request.
	key := strings.TrimSpace(runCLI(t, dataDir, cred, "", nil, "key", "create", "--name", "agents"))
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+p.addr+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/models right after key create: %s, want 200 OK", resp.Status)
	}

	p.interrupt(t, 10*time.Second)
	if alive(pgPID) {
		t.Fatalf("managed postgres (pid %d) still runs after gatehouse stopped", pgPID)
	}

	// With no server running, the CLI starts and stops Postgres itself; data persisted.
	list = runCLI(t, dataDir, cred, "", nil, "user", "list")
	if !strings.Contains(list, "admin@localhost") || !strings.Contains(list, "viewer@example.com") {
		t.Fatalf("user list after restart lost users:\n%s", list)
	}
	if pid := postmasterPID(t, dataDir); alive(pid) {
		t.Fatalf("the CLI left postgres (pid %d) running", pid)
	}
}

// TestServeRecoversAfterKill: after kill -9 of Gatehouse and its Postgres, the next
// start comes up.
func TestServeRecoversAfterKill(t *testing.T) {
	t.Parallel()
	dataDir := privateDir(t, nil)
	p := startServe(t, dataDir, nil, nil)
	pgPID := postmasterPID(t, dataDir)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if err := syscall.Kill(pgPID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill postgres: %v", err)
	}
	waitGone(t, pgPID)

	p2 := startServe(t, dataDir, nil, nil)
	p2.interrupt(t, 10*time.Second)

	// Only Gatehouse killed: the Postgres it left behind is stopped and restarted.
	p3 := startServe(t, dataDir, nil, nil)
	orphan := postmasterPID(t, dataDir)
	if err := p3.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p3.done
	p4 := startServe(t, dataDir, nil, nil)
	p4.interrupt(t, 10*time.Second)
	waitGone(t, orphan)
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		// Reap it if it is our child's orphan re-parented to us; otherwise just wait.
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive", pid)
		}
		time.Sleep(20 * time.Millisecond) // polling a process table, not synchronising goroutines
	}
}

// TestBootstrapSecrets: GATEHOUSE_BOOTSTRAP_CLIENT_KEY makes a key that the gateway
// accepts, idempotently across restarts; the client key never reaches the upstream.
func TestBootstrapSecrets(t *testing.T) {
	t.Parallel()
	dataDir := privateDir(t, nil)
	const clientKey = "bootstrap-client-key-0123456789"
	env := []string{"GATEHOUSE_BOOTSTRAP_CLIENT_KEY=" + clientKey, "GATEHOUSE_BOOTSTRAP_API_TOKEN=bootstrap-api-token-0123456789"}
	for round := range 2 {
		p := startServe(t, dataDir, nil, env)
		req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("round %d: GET /v1/models with the bootstrap key: %s %s", round, resp.Status, body)
		}
		req.Header.Set("Authorization", "Bearer wrong-key-0123456789")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("round %d: wrong key got %s, want 401", round, resp.Status)
		}
		p.interrupt(t, 10*time.Second)
	}
}

// TestDemoPrintsTheListeningAddress: with GATEHOUSE_ADDR on port 0 the demo's
// demo-traffic hint names the port actually bound, the one "listening on" names.
func TestDemoPrintsTheListeningAddress(t *testing.T) {
	t.Parallel()
	dataDir := privateDir(t, nil)
	p := &proc{t: t, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binPath, "serve", "--demo")
	p.cmd.Env = testEnv(dataDir, "127.0.0.1:0", "GATEHOUSE_ADMIN_PASSWORD=correct horse battery")
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		<-p.done
	})
	const listening = "Gatehouse is listening on "
	deadline := time.Now().Add(90 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(p.stdout.String(), listening) {
		select {
		case <-p.done:
			t.Fatalf("gatehouse exited early\nstdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("gatehouse did not say where it listens\nstdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
		}
	}
	out := p.stdout.String()
	_, rest, _ := strings.Cut(out, listening)
	url, _, _ := strings.Cut(rest, "\n")
	if strings.HasSuffix(url, ":0") {
		t.Fatalf("listening on %q, want the bound port", url)
	}
	if want := "demo-traffic --url " + url + " "; !strings.Contains(out, want) {
		t.Fatalf("stdout lacks %q:\n%s", want, out)
	}
	p.addr = strings.TrimPrefix(url, "http://")
	p.interrupt(t, 10*time.Second)
}
