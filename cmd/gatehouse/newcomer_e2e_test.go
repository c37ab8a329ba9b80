package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// runBin runs the gatehouse binary with env to completion (2 minutes at most) and
// returns its exit status, stdout and stderr.
func runBin(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errb.String()
	default:
		t.Fatalf("gatehouse %s: %v", strings.Join(args, " "), err)
		return 0, "", ""
	}
}

// signInStatus posts the sign-in form to p and returns the status (a redirect when the
// password is right, 401 when not).
func signInStatus(t *testing.T, p *proc, email, password string) int {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"email": {email}, "password": {password}}
	res, err := client.PostForm("http://"+p.addr+"/login", form)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestDemoTakenPortPrintsNoPassword: serve --demo on a taken port exits 1 naming the
// address, without printing (or creating) an admin password; the next start on a free
// port prints a password that signs in.
func TestDemoTakenPortPrintsNoPassword(t *testing.T) {
	t.Parallel()
	dataDir := privateDir(t, nil)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	code, stdout, stderr := runBin(t, testEnv(dataDir, taken.Addr().String()), "serve", "--demo")
	if code != 1 {
		t.Fatalf("serve --demo on a taken port: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "password") || strings.Contains(stderr, "password") {
		t.Errorf("a start that failed to listen printed a password:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	if !strings.Contains(stderr, "listen on "+taken.Addr().String()) {
		t.Errorf("stderr does not name the taken address:\n%s", stderr)
	}

	p := startServe(t, dataDir, nil, nil, "--demo")
	m := regexp.MustCompile(`Admin user: admin@localhost  password: (\S+)`).FindStringSubmatch(p.stdout.String())
	if m == nil {
		t.Fatalf("the next start printed no password:\n%s", p.stdout)
	}
	if st := signInStatus(t, p, "admin@localhost", m[1]); st < 300 || st > 399 {
		t.Errorf("sign-in with the printed password: %d, want a redirect", st)
	}
	if st := signInStatus(t, p, "admin@localhost", m[1]+"x"); st != http.StatusUnauthorized {
		t.Errorf("sign-in with a wrong password: %d, want 401", st)
	}
	p.interrupt(t, 10*time.Second)
}

// TestDemoUpstreamKeepsItsAddress: a config exported from the demo diffs clean (exit 0)
// after a restart, since the fake upstream listens on the same address again; the demo
// has a gemini connection that answers the Gemini API.
func TestDemoUpstreamKeepsItsAddress(t *testing.T) {
	t.Parallel()
	dataDir := privateDir(t, nil)
	p := startServe(t, dataDir, nil, nil, "--demo")
	exported := runCLI(t, dataDir, nil, "", nil, "config", "export")
	if !strings.Contains(exported, "name: gemini-main") || !strings.Contains(exported, "apiStyle: gemini") {
		t.Errorf("the demo config has no gemini connection:\n%s", exported)
	}
	key, err := os.ReadFile(filepath.Join(dataDir, demoKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+p.addr+"/v1beta/models/gemini-2.5-flash:generateContent",
		strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-goog-api-key", strings.TrimSpace(string(key)))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("Gemini generateContent through the demo: %s, want 200", res.Status)
	}
	p.interrupt(t, 10*time.Second)

	file := filepath.Join(t.TempDir(), "gatehouse.yaml")
	if err := os.WriteFile(file, []byte(exported), 0o600); err != nil {
		t.Fatal(err)
	}
	p = startServe(t, dataDir, nil, nil, "--demo")
	env := testEnv(dataDir, freeAddr(t))
	if code, out, errOut := runBin(t, env, "config", "diff", file); code != 0 {
		t.Errorf("config diff after a restart: exit %d, want 0 (no change)\n%s\n%s", code, out, errOut)
	}
	p.interrupt(t, 10*time.Second)
}

// TestDemoTrafficUnreachable: demo-traffic pointed at nothing exits 1 at once, naming
// the connection error, instead of counting failures and exiting 0.
func TestDemoTrafficUnreachable(t *testing.T) {
	t.Parallel()
	env := testEnv(t.TempDir(), "127.0.0.1:1")
	code, stdout, stderr := runBin(t, env, "demo-traffic", "--url", "http://127.0.0.1:1", "--key", "gh_ck_not-a-real-key-0123", "--duration", "1m")
	if code != 1 {
		t.Fatalf("demo-traffic against nothing: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "http://127.0.0.1:1") || !strings.Contains(stderr, "connection refused") {
		t.Errorf("stderr does not name the address and the connection error:\n%s", stderr)
	}
}

// TestRedisAwayLogsJSON: with Redis stopped under a cluster-mode serve, every stderr
// line is a JSON object, go-redis's own complaints (a pool that cannot dial) included.
func TestRedisAwayLogsJSON(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	p := serveReplica(t, storetest.URL(t), store.GenerateSecretKey(), rs.url(), "fail-open", 300*time.Millisecond)
	rs.stop(t)
	waitFor(t, 60*time.Second, "go-redis to report that it cannot dial", func() bool {
		return strings.Contains(p.stderr.String(), "failed to dial")
	})
	p.interrupt(t, 10*time.Second)
	for i, line := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Errorf("stderr line %d is not a JSON object: %q", i+1, line)
		}
	}
}
