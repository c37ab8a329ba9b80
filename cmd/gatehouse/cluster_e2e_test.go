package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/cluster"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// redisServerBin is the Redis server the cluster tests run; scripts/test installs it.
const redisServerBin = "/usr/bin/redis-server"

// redisChild is a redis-server started by a test, listening only on a unix socket.
type redisChild struct {
	sock string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *lockedBuffer
}

// startRedis starts redis-server for one test, without persistence, and stops it at the
// end of the test. It fails (never skips) when the server is not installed.
func startRedis(t *testing.T) *redisChild {
	t.Helper()
	if _, err := os.Stat(redisServerBin); err != nil {
		t.Fatalf("cluster mode tests need %s (apt-get install redis-server; scripts/test installs it): %v", redisServerBin, err)
	}
	// A short directory: a unix socket path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "ghredis-")
	if err != nil {
		t.Fatal(err)
	}
	r := &redisChild{sock: filepath.Join(dir, "redis.sock"), log: &lockedBuffer{}}
	t.Cleanup(func() {
		r.stop(t)
		_ = os.RemoveAll(dir)
	})
	r.start(t)
	return r
}

// url is GATEHOUSE_REDIS_URL for this server.
func (r *redisChild) url() string { return "unix://" + r.sock }

// start runs the server and waits until it answers PING.
func (r *redisChild) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(redisServerBin, "--port", "0", "--unixsocket", r.sock,
		"--save", "", "--appendonly", "no")
	cmd.Stdout, cmd.Stderr = r.log, r.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.mu.Unlock()

	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: r.sock, MaxRetries: -1})
	defer rdb.Close()
	waitFor(t, 10*time.Second, "redis-server to answer PING", func() bool {
		select {
		case <-done:
			t.Fatalf("redis-server exited at start:\n%s", r.log)
		default:
		}
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		return rdb.Ping(ctx).Err() == nil
	})
}

// stop kills the server (no shutdown save: it has no persistence anyway) and waits for it.
func (r *redisChild) stop(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.cmd = nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("kill redis-server: %v", err)
	}
	<-done
}

// serveClustered starts gatehouse serve on dbURL in cluster mode with redisURL.
func serveClustered(t *testing.T, dbURL, secret, redisURL, failMode string) *proc {
	t.Helper()
	env := []string{
		"GATEHOUSE_DATABASE_URL=" + dbURL,
		"GATEHOUSE_SECRET_KEY=" + secret,
		"GATEHOUSE_BOOTSTRAP_API_TOKEN=" + e2eToken,
		"GATEHOUSE_BOOTSTRAP_CLIENT_KEY=" + e2eClientKey,
		"GATEHOUSE_REDIS_URL=" + redisURL,
		"GATEHOUSE_CLUSTER_FAIL_MODE=" + failMode,
	}
	return startServe(t, privateDir(t, nil), nil, env)
}

// readyBody returns /readyz's status and body.
func readyBody(t *testing.T, p *proc) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + p.addr + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// chatReply is a chat completion's status, Retry-After and error code.
type chatReply struct {
	status     int
	retryAfter string
	code       string
}

// chatFull sends one non-streaming chat completion through p.
func chatFull(ctx context.Context, p *proc, model string) (chatReply, error) {
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, model)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return chatReply{}, err
	}
	req.Header.Set("Authorization", "Bearer "+e2eClientKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return chatReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return chatReply{}, err
	}
	r := chatReply{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode != http.StatusOK {
		var eb struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &eb); err != nil {
			return r, fmt.Errorf("error body %q: %w", b, err)
		}
		r.code = eb.Error.Code
	}
	return r, nil
}

// TestClusterCapHoldsAcrossReplicas: three Gatehouse processes share one Postgres and one
// Redis; 60 concurrent requests spread over all three never put more than the model cap
// of 2 on the upstream, and every one of them succeeds.
func TestClusterCapHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	dbURL := storetest.URL(t)
	secret := store.GenerateSecretKey()
	up := startUpstream(t, upstreamtest.Options{Latency: 200 * time.Millisecond, Models: []string{"glm-5", "glm-4.7"}})
	replicas := []*proc{
		serveClustered(t, dbURL, secret, rs.url(), "fail-open"),
		serveClustered(t, dbURL, secret, rs.url(), "fail-open"),
		serveClustered(t, dbURL, secret, rs.url(), "fail-open"),
	}
	for i, p := range replicas {
		if st, body := readyBody(t, p); st != http.StatusOK || !strings.Contains(body, "cluster mode: redis ok") {
			t.Fatalf("replica %d /readyz = %d %q, want 200 saying cluster mode: redis ok", i, st, body)
		}
	}

	conn := createConnection(t, replicas[0], up.URL(), `{"modelConcurrency":{"glm-5":2},"maxWaitMs":120000}`)
	modelGate := "model:" + conn.ID + ":glm-5"
	for i, p := range replicas {
		waitFor(t, 5*time.Second, fmt.Sprintf("replica %d to load the cap", i), func() bool { return gateCap(t, p, modelGate) == 2 })
	}

	const n = 60
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		p := replicas[i%len(replicas)]
		wg.Go(func() {
			st, err := chat(ctx, p, "glm-5")
			if err != nil {
				st = -1
			}
			statuses[i] = st
		})
	}
	wg.Wait()
	for i, st := range statuses {
		if st != http.StatusOK {
			t.Errorf("request %d (replica %d) ended with status %d, want 200", i, i%len(replicas), st)
		}
	}
	if got := up.Requests(e2eUpstream, "glm-5"); got != n {
		t.Errorf("upstream saw %d glm-5 requests, want %d", got, n)
	}
	if peak := up.Peak(e2eUpstream, "glm-5"); peak != 2 {
		t.Errorf("upstream peak for glm-5 across 3 replicas = %d, want exactly the cap 2", peak)
	}
}

// TestClusterFailClosed: with Redis gone and GATEHOUSE_CLUSTER_FAIL_MODE=fail-closed,
// requests get 503 CLUSTER_UNAVAILABLE with Retry-After 1 (from the failed Redis call:
// with maxWaitMs 60000 a request left waiting would end in a timeout, not a 503), /readyz
// stays 200 and says so; once Redis is back, requests succeed again.
func TestClusterFailClosed(t *testing.T) {
	t.Parallel()
	if gateway.CodeClusterUnavailable != cluster.CodeUnavailable {
		t.Fatalf("gateway.CodeClusterUnavailable %q != cluster.CodeUnavailable %q",
			gateway.CodeClusterUnavailable, cluster.CodeUnavailable)
	}
	rs := startRedis(t)
	dbURL := storetest.URL(t)
	secret := store.GenerateSecretKey()
	up := startUpstream(t, upstreamtest.Options{Models: []string{"glm-5", "glm-4.7"}})
	replicas := []*proc{
		serveClustered(t, dbURL, secret, rs.url(), "fail-closed"),
		serveClustered(t, dbURL, secret, rs.url(), "fail-closed"),
	}
	conn := createConnection(t, replicas[0], up.URL(), `{"modelConcurrency":{"glm-5":2},"maxWaitMs":60000}`)
	modelGate := "model:" + conn.ID + ":glm-5"
	ctx := t.Context()
	for i, p := range replicas {
		waitFor(t, 5*time.Second, fmt.Sprintf("replica %d to load the cap", i), func() bool { return gateCap(t, p, modelGate) == 2 })
		if r, err := chatFull(ctx, p, "glm-5"); err != nil || r.status != http.StatusOK {
			t.Fatalf("replica %d with Redis up: %+v, %v; want 200", i, r, err)
		}
	}

	rs.stop(t)
	stopped := time.Now()
	for i, p := range replicas {
		r, err := chatFull(ctx, p, "glm-5")
		if err != nil {
			t.Fatalf("replica %d with Redis away: %v", i, err)
		}
		want := chatReply{status: http.StatusServiceUnavailable, retryAfter: "1", code: gateway.CodeClusterUnavailable}
		if r != want {
			t.Errorf("replica %d with Redis away = %+v, want %+v", i, r, want)
		}
	}
	// How soon is a matter of the Redis client's dial retries and the machine's
	// load: logged, not asserted (no pass/fail on wall-clock time).
	t.Logf("both replicas answered CLUSTER_UNAVAILABLE %s after Redis was killed", time.Since(stopped))
	for i, p := range replicas {
		if st, body := readyBody(t, p); st != http.StatusOK || !strings.Contains(body, "cluster mode: redis unavailable (fail-closed)") {
			t.Errorf("replica %d /readyz with Redis away = %d %q, want 200 saying redis unavailable (fail-closed)", i, st, body)
		}
	}

	rs.start(t)
	for i, p := range replicas {
		waitFor(t, 10*time.Second, fmt.Sprintf("replica %d to admit again", i), func() bool {
			r, err := chatFull(ctx, p, "glm-5")
			return err == nil && r.status == http.StatusOK
		})
		if st, body := readyBody(t, p); st != http.StatusOK || !strings.Contains(body, "cluster mode: redis ok") {
			t.Errorf("replica %d /readyz after Redis returned = %d %q, want 200 saying redis ok", i, st, body)
		}
	}
}

// TestClusterConfigErrors: a bad fail mode or Redis URL stops serve before anything
// starts, and the message never echoes the URL (it may hold a password).
func TestClusterConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, redisURL, failMode, want string
	}{
		{name: "fail mode", redisURL: "redis://127.0.0.1:1/0", failMode: "fail-sometimes", want: "GATEHOUSE_CLUSTER_FAIL_MODE"},
		{name: "scheme", redisURL: "ftp://u:hunter2secret@127.0.0.1/0", failMode: "fail-open", want: "GATEHOUSE_REDIS_URL"},
		{name: "unparsable", redisURL: "redis://u:hunter2secret@127.0.0.1:port/0", failMode: "fail-open", want: "GATEHOUSE_REDIS_URL"},
		// Checked without Redis too: a typo must not wait for the day cluster mode is on.
		{name: "fail mode without redis", redisURL: "", failMode: "fail-sometimes", want: "GATEHOUSE_CLUSTER_FAIL_MODE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{
				// Set, so that serve leaves this test process's GC settings alone.
				"GOGC":                        "100",
				"GOMEMLIMIT":                  "off",
				"GATEHOUSE_DATA_DIR":          t.TempDir(),
				"GATEHOUSE_ADDR":              "127.0.0.1:0",
				"GATEHOUSE_REDIS_URL":         tc.redisURL,
				"GATEHOUSE_CLUSTER_FAIL_MODE": tc.failMode,
			}
			var stdout, stderr strings.Builder
			// Bounded: a serve that accepted the setting would run until cancelled.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err := run(ctx, []string{"serve"}, func(k string) string { return env[k] },
				strings.NewReader(""), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve = %v, want an error naming %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2secret") {
				t.Errorf("the error echoes the Redis password: %v", err)
			}
		})
	}
}
