package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// serveWith starts gatehouse serve against dbURL with the bootstrap secrets and extra
// environment.
func serveWith(t *testing.T, dbURL string, extra ...string) *proc {
	t.Helper()
	env := append([]string{
		"GATEHOUSE_DATABASE_URL=" + dbURL,
		"GATEHOUSE_SECRET_KEY=" + store.GenerateSecretKey(),
		"GATEHOUSE_BOOTSTRAP_API_TOKEN=" + e2eToken,
		"GATEHOUSE_BOOTSTRAP_CLIENT_KEY=" + e2eClientKey,
	}, extra...)
	return startServe(t, privateDir(t, nil), nil, env)
}

// gateLoadOf returns the in-flight and queued counts of p's gate key.
func gateLoadOf(t *testing.T, p *proc, key string) (inFlight, queued int) {
	t.Helper()
	var g apiGates
	apiDo(t, p, http.MethodGet, "/api/v1/gates", "", &g)
	for _, gate := range g.Gates {
		if gate.Key == key {
			return gate.InFlight, gate.Queued
		}
	}
	return 0, 0
}

// chatAnswer is a gateway answer: status, Retry-After and error code.
type chatAnswer struct {
	status     int
	retryAfter string
	code       string
	err        error
}

func chatFor(ctx context.Context, p *proc, model string) chatAnswer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return chatAnswer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+e2eClientKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return chatAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	var eb struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &eb)
	return chatAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), code: eb.Error.Code, err: err}
}

// TestShutdownAnswersQueuedAndLetsInFlightFinish: a real serve process with a cap-1
// gate, one request in flight (held by the upstream) and 20 queued; on SIGTERM all 20
// queued get 503 SHUTTING_DOWN with Retry-After 1 while the one in flight is still
// held, the process waits for that one (it is still running after the 20 answers),
// which then finishes with 200, and the process exits with status 0 as soon as it has,
// long before the 30 s shutdown timeout.
func TestShutdownAnswersQueuedAndLetsInFlightFinish(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, upstreamtest.Options{Models: []string{"glm-5"}})
	hold := make(chan struct{})
	if err := up.SetKeyBehavior(e2eUpstream, upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			close(hold)
		}
	}()
	p := serveWith(t, storetest.URL(t), "GATEHOUSE_SHUTDOWN_TIMEOUT=30s")
	conn := createConnection(t, p, up.URL(), `{"maxConcurrent":1,"maxWaitMs":120000}`)
	gate := "connection:" + conn.ID
	waitFor(t, 10*time.Second, "the connection's cap-1 gate", func() bool { return gateCap(t, p, gate) == 1 })

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	inflight := make(chan chatAnswer, 1)
	go func() { inflight <- chatFor(ctx, p, "glm-5") }()
	if err := up.WaitInFlight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	const queued = 20
	answers := make(chan chatAnswer, queued)
	var wg sync.WaitGroup
	for range queued {
		wg.Go(func() { answers <- chatFor(ctx, p, "glm-5") })
	}
	waitFor(t, 20*time.Second, "20 queued", func() bool { _, q := gateLoadOf(t, p, gate); return q == queued })

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(answers)
	shuttingDown := 0
	for a := range answers {
		if a.err == nil && a.status == http.StatusServiceUnavailable && a.code == "SHUTTING_DOWN" && a.retryAfter == "1" {
			shuttingDown++
		} else {
			t.Errorf("queued request: status %d, code %q, Retry-After %q, error %v; want 503 SHUTTING_DOWN, Retry-After 1",
				a.status, a.code, a.retryAfter, a.err)
		}
	}
	if shuttingDown != queued {
		t.Errorf("%d of %d queued requests got 503 SHUTTING_DOWN", shuttingDown, queued)
	}
	select {
	case <-p.done:
		t.Fatalf("gatehouse exited while a request was in flight\nstderr:\n%s", p.stderr)
	default:
	}
	if up.InFlight() != 1 {
		t.Fatalf("the upstream has %d requests in flight, want the held one", up.InFlight())
	}

	close(hold)
	released = true
	if a := <-inflight; a.err != nil || a.status != http.StatusOK {
		t.Errorf("in-flight request: status %d, error %v; want 200", a.status, a.err)
	}
	// The shutdown timeout is 30 s; the process must exit once the in-flight request
	// has finished, not when the timeout runs out.
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("gatehouse did not exit within 15 s of its last request (shutdown timeout 30 s)\nstderr:\n%s", p.stderr)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d, want 0\nstderr:\n%s", code, p.stderr)
	}
	if strings.Contains(p.stderr.String(), "timed out") {
		t.Errorf("the shutdown ran into its timeout:\n%s", p.stderr)
	}
}

// TestMetricsAuthAndListener: on the main listener /metrics answers 401 without an API
// token and 200 with a viewer's; GATEHOUSE_METRICS_ADDR serves it without a token, and
// nothing else.
func TestMetricsAuthAndListener(t *testing.T) {
	t.Parallel()
	metricsAddr := freeAddr(t)
	p := serveWith(t, storetest.URL(t), "GATEHOUSE_METRICS_ADDR="+metricsAddr)
	var tok struct {
		Secret string `json:"secret"`
	}
	apiDo(t, p, http.MethodPost, "/api/v1/api-tokens", `{"name":"scraper","role":"viewer"}`, &tok)
	get := func(url, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	main := "http://" + p.addr + "/metrics"
	if st, body := get(main, ""); st != http.StatusUnauthorized || strings.Contains(body, "gatehouse_") {
		t.Errorf("main listener without a token: %d with %d bytes (metrics in it: %v); want 401 and no metrics",
			st, len(body), strings.Contains(body, "gatehouse_"))
	}
	if st, body := get(main, tok.Secret); st != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("main listener with a viewer token: %d; want 200 with the metrics", st)
	}
	if st, body := get("http://"+metricsAddr+"/metrics", ""); st != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("metrics listener without a token: %d; want 200 with the metrics", st)
	}
	if st, _ := get("http://"+metricsAddr+"/api/v1/connections", e2eToken); st != http.StatusNotFound {
		t.Errorf("metrics listener GET /api/v1/connections: %d, want 404 (it serves only /metrics)", st)
	}
	if !strings.Contains(p.stdout.String(), "Gatehouse metrics on http://"+metricsAddr+"/metrics") {
		t.Errorf("stdout does not name the metrics listener:\n%s", p.stdout)
	}
}

// TestServeTimeoutErrors: a bad GATEHOUSE_SHUTDOWN_TIMEOUT, GATEHOUSE_BODY_READ_TIMEOUT
// or GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT (or its flag) stops serve before anything starts, with an error naming the variable.
func TestServeTimeoutErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, value string
		args             []string
	}{
		{"shutdown word", "GATEHOUSE_SHUTDOWN_TIMEOUT", "soon", nil},
		{"shutdown zero", "GATEHOUSE_SHUTDOWN_TIMEOUT", "0s", nil},
		{"body negative", "GATEHOUSE_BODY_READ_TIMEOUT", "-1s", nil},
		{"body flag", "GATEHOUSE_BODY_READ_TIMEOUT", "", []string{"--body-read-timeout", "30"}},
		{"in flight word", "GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT", "lots", nil},
		{"in flight zero", "GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT", "0MiB", nil},
		{"in flight unit", "GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT", "2MB", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{
				"GOGC": "100", "GOMEMLIMIT": "off", // serve leaves this process's GC alone
				"GATEHOUSE_DATA_DIR": t.TempDir(), "GATEHOUSE_ADDR": "127.0.0.1:0", tc.key: tc.value,
			}
			var stdout, stderr strings.Builder
			err := run(t.Context(), append([]string{"serve"}, tc.args...), func(k string) string { return env[k] },
				strings.NewReader(""), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("serve = %v, want an error naming %s", err, tc.key)
			}
		})
	}
}

// TestParseByteSize: GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT in bytes or with a
// KiB, MiB or GiB suffix.
func TestParseByteSize(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]int64{"1024": 1024, "64KiB": 64 << 10, "256MiB": 256 << 20, "2GiB": 2 << 30} {
		if got, err := parseByteSize("X", v); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"", "-1", "0", "1.5MiB", "2MB", "MiB", "99999999999GiB"} {
		if _, err := parseByteSize("X", v); err == nil {
			t.Errorf("parseByteSize(%q) accepted", v)
		}
	}
}
