package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

const (
	e2eToken     = "e2e-api-token-0123456789abcdef"
	e2eClientKey = "e2e-client-key-0123456789abcdef"
	e2eUpstream  = "upstream-secret-key-e2e-9f2c"
)

// startUpstream runs the fake provider for one test.
func startUpstream(t *testing.T, opts upstreamtest.Options) *upstreamtest.Server {
	t.Helper()
	up := upstreamtest.NewServer(opts)
	if _, err := up.Start(t.Context(), "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	return up
}

// serveOnURL starts gatehouse serve against an existing database.
func serveOnURL(t *testing.T, dbURL, secret string) *proc {
	t.Helper()
	env := []string{
		"GATEHOUSE_DATABASE_URL=" + dbURL,
		"GATEHOUSE_SECRET_KEY=" + secret,
		"GATEHOUSE_BOOTSTRAP_API_TOKEN=" + e2eToken,
		"GATEHOUSE_BOOTSTRAP_CLIENT_KEY=" + e2eClientKey,
	}
	return startServe(t, privateDir(t, nil), nil, env)
}

// apiDo sends a REST API request and decodes a JSON answer into out (when non-nil).
func apiDo(t *testing.T, p *proc, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+p.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	if resp.StatusCode >= 300 && out != nil {
		t.Fatalf("%s %s: %s %s", method, path, resp.Status, b)
	}
	return resp.StatusCode
}

type apiConnection struct {
	ID                 string          `json:"id"`
	Version            int64           `json:"version"`
	RateLimitOverrides json.RawMessage `json:"rateLimitOverrides"`
}

type apiGates struct {
	Gates []struct {
		Key      string `json:"key"`
		Cap      int    `json:"cap"`
		InFlight int    `json:"inFlight"`
		Queued   int    `json:"queued"`
	} `json:"gates"`
}

// gateCap returns the cap p's gateway has for gate key, -1 when it lists no such gate.
func gateCap(t *testing.T, p *proc, key string) int {
	t.Helper()
	var g apiGates
	apiDo(t, p, http.MethodGet, "/api/v1/gates", "", &g)
	for _, gate := range g.Gates {
		if gate.Key == key {
			return gate.Cap
		}
	}
	return -1
}

// waitFor polls cond every 20 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// chat sends one non-streaming chat completion through p and returns the status.
func chat(ctx context.Context, p *proc, model string) (int, error) {
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, model)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+"/v1/chat/completions", bytes.NewBufferString(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+e2eClientKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func createConnection(t *testing.T, p *proc, baseURL, overrides string) apiConnection {
	t.Helper()
	body := fmt.Sprintf(`{"name":"zai-main","provider":"zai","apiStyle":"openai","baseUrl":%q,"apiKey":%q,
		"models":["glm-5","glm-4.7"],"rateLimitOverrides":%s}`, baseURL+"/v1", e2eUpstream, overrides)
	var c apiConnection
	apiDo(t, p, http.MethodPost, "/api/v1/connections", body, &c)
	return c
}

// TestLiveEditAcrossProcesses: two Gatehouse processes on one database; a PATCH through
// one changes the other's caps within a second, and the upstream sees the new cap.
func TestLiveEditAcrossProcesses(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	secret := store.GenerateSecretKey()
	up := startUpstream(t, upstreamtest.Options{Latency: 150 * time.Millisecond, Models: []string{"glm-5", "glm-4.7"}})
	a := serveOnURL(t, dbURL, secret)
	b := serveOnURL(t, dbURL, secret)

	conn := createConnection(t, a, up.URL(), `{"maxConcurrent":4,"modelConcurrency":{"glm-5":1,"glm-4.7":3},"maxWaitMs":60000}`)
	modelGate := "model:" + conn.ID + ":glm-5"
	waitFor(t, 5*time.Second, "process B to load the new connection", func() bool { return gateCap(t, b, modelGate) == 1 })

	// Queue 12 requests on B against the cap of 1.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	statuses := make(chan int, 12)
	for range 12 {
		wg.Go(func() {
			st, err := chat(ctx, b, "zai/glm-5")
			if err != nil {
				st = -1
			}
			statuses <- st
		})
	}
	waitFor(t, 10*time.Second, "requests to reach the upstream", func() bool { return up.InFlight() >= 1 })
	if peak := up.Peak(e2eUpstream, "glm-5"); peak != 1 {
		t.Fatalf("upstream peak for glm-5 before the edit = %d, want 1", peak)
	}

	start := time.Now()
	if st := apiDo(t, a, http.MethodPatch, "/api/v1/connections/"+conn.ID,
		`{"rateLimitOverrides":{"modelConcurrency":{"glm-5":3}}}`, &apiConnection{}); st != http.StatusOK {
		t.Fatalf("PATCH: status %d", st)
	}
	waitFor(t, time.Second, "process B to apply the new cap", func() bool { return gateCap(t, b, modelGate) == 3 })
	t.Logf("cap change reached the other process after %s", time.Since(start))
	waitFor(t, 10*time.Second, "the upstream to see 3 concurrent glm-5 requests", func() bool {
		return up.Peak(e2eUpstream, "glm-5") == 3
	})
	wg.Wait()
	close(statuses)
	for st := range statuses {
		if st != http.StatusOK {
			t.Fatalf("a queued request ended with status %d, want 200", st)
		}
	}
	if peak := up.Peak(e2eUpstream, "glm-5"); peak > 3 {
		t.Fatalf("upstream peak for glm-5 = %d, above the new cap 3", peak)
	}
	if up.SawKey(e2eClientKey) {
		t.Fatal("the upstream saw the client's key")
	}

	// Lower the cap again through the API: nothing above the new cap is admitted.
	if st := apiDo(t, a, http.MethodPatch, "/api/v1/connections/"+conn.ID,
		`{"rateLimitOverrides":{"modelConcurrency":{"glm-5":1}}}`, &apiConnection{}); st != http.StatusOK {
		t.Fatalf("PATCH lower: status %d", st)
	}
	waitFor(t, time.Second, "process B to apply the lowered cap", func() bool { return gateCap(t, b, modelGate) == 1 })
	up.Reset()
	statuses = make(chan int, 8)
	for range 8 {
		wg.Go(func() {
			st, err := chat(ctx, b, "glm-5")
			if err != nil {
				st = -1
			}
			statuses <- st
		})
	}
	wg.Wait()
	close(statuses)
	for st := range statuses {
		if st != http.StatusOK {
			t.Fatalf("a request after lowering ended with status %d, want 200", st)
		}
	}
	if peak := up.Peak(e2eUpstream, "glm-5"); peak != 1 {
		t.Fatalf("upstream peak for glm-5 after lowering the cap to 1 = %d, want 1", peak)
	}
}

// TestPostgresAwayKeepsServing: with Postgres stopped, traffic keeps flowing on the last
// config and /readyz stays 200; once Postgres is back, edits propagate again.
func TestPostgresAwayKeepsServing(t *testing.T) {
	t.Parallel()
	cluster := storetest.Cluster(t)
	ctx := t.Context()
	if err := ensureDatabase(ctx, cluster.URL("postgres"), "gatehouse"); err != nil {
		t.Fatal(err)
	}
	up := startUpstream(t, upstreamtest.Options{Models: []string{"glm-5"}})
	p := serveOnURL(t, cluster.URL("gatehouse"), store.GenerateSecretKey())
	conn := createConnection(t, p, up.URL(), `{"modelConcurrency":{"glm-5":1}}`)
	modelGate := "model:" + conn.ID + ":glm-5"
	waitFor(t, 5*time.Second, "the connection to load", func() bool { return gateCap(t, p, modelGate) == 1 })

	if err := cluster.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		st, err := chat(ctx, p, "glm-5")
		if err != nil || st != http.StatusOK {
			t.Fatalf("request %d with Postgres away: status %d, err %v", i, st, err)
		}
	}
	p.waitStatus(t, "/readyz", http.StatusOK, 5*time.Second)

	if err := cluster.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The API works again once the pool reconnects; the edit reaches the gateway.
	waitFor(t, 30*time.Second, "the API to reach Postgres again", func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPatch, "http://"+p.addr+"/api/v1/connections/"+conn.ID,
			strings.NewReader(`{"rateLimitOverrides":{"modelConcurrency":{"glm-5":2}}}`))
		req.Header.Set("Authorization", "Bearer "+e2eToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	waitFor(t, 30*time.Second, "the edit to reach the gateway after Postgres came back", func() bool {
		return gateCap(t, p, modelGate) == 2
	})
}
