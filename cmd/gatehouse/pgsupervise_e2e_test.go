package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// apiStatus sends GET path with the test's API token and returns the answer.
func apiStatus(t *testing.T, p *proc, path string) (int, http.Header, []byte) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+p.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// namedConnection creates a connection called name (to an address nothing listens on).
func namedConnection(t *testing.T, p *proc, name, overrides string) apiConnection {
	t.Helper()
	body := fmt.Sprintf(`{"name":%q,"provider":"zai","apiStyle":"openai","baseUrl":"http://127.0.0.1:9/v1",
		"apiKey":"upstream-secret-key-0123456789","models":["glm-5"],"rateLimitOverrides":%s}`, name, overrides)
	var c apiConnection
	apiDo(t, p, http.MethodPost, "/api/v1/connections", body, &c)
	return c
}

// dashboardDatabaseAway is what the dashboard's page says while the database is away.
const dashboardDatabaseAway = "The database cannot be reached right now."

// dashboardSignIn signs in on p's dashboard and returns a client holding the session.
func dashboardSignIn(t *testing.T, p *proc, email, password string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar, Timeout: 5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm("http://"+p.addr+"/login", url.Values{"email": {email}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /login: %s, want 303", resp.Status)
	}
	return client
}

// TestManagedPostgresKilledUnderServe is issue 14's finding 11: kill -9 of the managed
// postmaster under a running serve. While it is down the API answers 503 with
// Retry-After and the dashboard says the database is away; serve starts it again by itself, the API answers 200 within 15 s of the
// kill with the data written before, and serve is the same process throughout.
//
// The outage is held open deterministically: a process working in the data directory
// looks like a backend of the dead server, and pglocal does not start a new server
// until it is gone. The test lets it go once it has seen the 503.
func TestManagedPostgresKilledUnderServe(t *testing.T) {
	t.Parallel()
	dataDir := privateDir(t, nil)
	p := startServe(t, dataDir, nil, []string{"GATEHOUSE_BOOTSTRAP_API_TOKEN=" + e2eToken})
	before := namedConnection(t, p, "before-the-kill", `{}`)
	runCLI(t, dataDir, nil, "correct horse battery\n", nil, "user", "add", "--email", "owner@example.com", "--role", "admin")
	dash := dashboardSignIn(t, p, "owner@example.com", "correct horse battery")

	loc, err := os.ReadFile(filepath.Join(dataDir, "cluster-location"))
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sleep", "600")
	holder.Dir = filepath.Join(strings.TrimSpace(string(loc)), "data")
	if err := holder.Start(); err != nil {
		t.Fatalf("start the process holding the data dir: %v", err)
	}
	held := true
	release := func() {
		if held {
			held = false
			_ = holder.Process.Kill()
			_ = holder.Wait()
		}
	}
	t.Cleanup(release)

	pgPID := postmasterPID(t, dataDir)
	killed := time.Now()
	if err := syscall.Kill(pgPID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 postgres: %v", err)
	}
	deadline := killed.Add(15 * time.Second)

	// Down: 503 with Retry-After, as a problem document.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		status, header, body := apiStatus(t, p, "/api/v1/connections")
		if status == http.StatusServiceUnavailable {
			if header.Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After: %s", body)
			}
			if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
				t.Errorf("503 Content-Type %q, want application/problem+json: %s", ct, body)
			}
			resp, err := dash.Get("http://" + p.addr + "/")
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(page), dashboardDatabaseAway) {
				t.Errorf("dashboard with the database away: %s, want 503 saying %q:\n%s", resp.Status, dashboardDatabaseAway, page)
			}
			break
		}
		if status != http.StatusOK {
			t.Fatalf("GET /api/v1/connections with the database away: %d %s, want 503\nstderr:\n%s", status, body, p.stderr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 503 within 15 s of the kill\nstderr:\n%s", p.stderr)
		}
		<-tick.C
	}

	// Back: the same serve answers 200 with the connection made before the kill.
	release()
	for {
		status, _, body := apiStatus(t, p, "/api/v1/connections")
		if status == http.StatusOK {
			var list struct {
				Items []apiConnection `json:"items"`
			}
			if err := json.Unmarshal(body, &list); err != nil {
				t.Fatalf("decode %s: %v", body, err)
			}
			if len(list.Items) != 1 || list.Items[0].ID != before.ID {
				t.Fatalf("connections after the restart = %s, want the one created before (%s)", body, before.ID)
			}
			t.Logf("API back %s after the kill", time.Since(killed).Round(time.Millisecond))
			break
		}
		if status != http.StatusServiceUnavailable {
			t.Fatalf("GET /api/v1/connections while the database comes back: %d %s, want 503 or 200\nstderr:\n%s", status, body, p.stderr)
		}
		select {
		case <-p.done:
			t.Fatalf("serve exited\nstderr:\n%s", p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API did not answer 200 within 15 s of the kill (last: %d %s)\nstderr:\n%s", status, body, p.stderr)
		}
		<-tick.C
	}
	if pid := postmasterPID(t, dataDir); pid == pgPID || !alive(pid) {
		t.Errorf("postmaster after the restart: pid %d (killed: %d), want a new live one", pid, pgPID)
	}
	for _, want := range []string{"PostgreSQL exited unexpectedly; restarting it", "PostgreSQL restarted"} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("serve's log lacks %q:\n%s", want, p.stderr)
		}
	}

	// Writes work again, and the config loader's listener is back: the gateway
	// picks up a connection created after the restart.
	after := namedConnection(t, p, "after-the-restart", `{"maxConcurrent":3}`)
	waitFor(t, 10*time.Second, "the gateway to load the connection created after the restart", func() bool {
		return gateCap(t, p, "connection:"+after.ID) == 3
	})
	p.interrupt(t, 20*time.Second)
}
