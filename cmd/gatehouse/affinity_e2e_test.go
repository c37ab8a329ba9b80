package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/cluster"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestClusterAffinityKeepsPromptCache: two replicas sharing admission, limits
// and affinity bindings through one Redis, with every session's turns
// alternating between them, keep at least 0.85 of the prompt-cache share a
// single account gets for the same workload (16 agent sessions of 8 turns,
// 8 at a time, half with a session id, over 4 accounts of cap 3).
func TestClusterAffinityKeepsPromptCache(t *testing.T) {
	t.Parallel()
	const model = "claude-agent"
	upOpts := upstreamtest.Options{PromptCacheTTL: 5 * time.Minute, Latency: 5 * time.Millisecond}
	logger := slog.New(slog.DiscardHandler)
	auth := func(_ context.Context, s string) (gateway.ClientKey, bool) {
		return gateway.ClientKey{ID: "k1", Name: "agents", Enabled: true}, s == "sk-agents"
	}
	conns := func(upURL string, n, maxConc int) []gateway.Connection {
		var out []gateway.Connection
		for i := range n {
			out = append(out, gateway.Connection{ID: fmt.Sprintf("a%d", i), Name: fmt.Sprintf("acct-%d", i),
				Provider: "anthropic", APIStyle: "anthropic", BaseURL: upURL + "/v1", APIKey: fmt.Sprintf("acct-%d", i),
				Models: []string{model}, Enabled: true,
				Overrides: limits.Overrides{MaxConcurrent: new(maxConc), MaxWaitMs: new(60000)}})
		}
		return out
	}
	upstream := func() (*upstreamtest.Server, string) {
		up := upstreamtest.NewServer(upOpts)
		srv := httptest.NewServer(up)
		t.Cleanup(func() { _ = up.Close(); srv.Close() })
		return up, srv.URL
	}
	serve := func(o gateway.Options, cfg gateway.Config) string {
		o.Logger, o.Authenticate = logger, auth
		gw := gateway.New(o)
		gw.Apply(cfg)
		srv := httptest.NewServer(gw)
		t.Cleanup(func() { srv.Close(); gw.Close() })
		return srv.URL
	}
	share := func(up *upstreamtest.Server) float64 {
		var prompt, read int64
		for _, c := range up.PromptCache() {
			prompt, read = prompt+c.PromptTokens, read+c.CacheReadTokens
		}
		return float64(read) / float64(max(prompt, 1))
	}

	singleUp, singleURL := upstream()
	single := serve(gateway.Options{}, gateway.Config{Connections: conns(singleURL, 1, 12)})
	_ = runAgentSessions(t, []string{single}, model)

	rs := startRedis(t)
	up, upURL := upstream()
	prefix := fmt.Sprintf("aff%d", time.Now().UnixNano())
	var urls []string
	for i := range 2 {
		rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: rs.sock})
		ctrl, err := cluster.New(t.Context(), cluster.Options{Client: rdb, ReplicaID: fmt.Sprintf("r%d", i), Prefix: prefix, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		lim, err := cluster.NewLimits(cluster.LimitsOptions{Client: rdb, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		aff, err := cluster.NewAffinity(cluster.LimitsOptions{Client: rdb, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = ctrl.Close(context.Background())
			_ = rdb.Close()
		})
		urls = append(urls, serve(gateway.Options{Admission: ctrl, SharedLimits: lim, SharedAffinity: aff},
			gateway.Config{Connections: conns(upURL, 4, 3)}))
	}
	served := runAgentSessions(t, urls, model)
	moved := 0
	for i, conns := range served {
		if len(conns) > 1 {
			moved++
			t.Logf("session %d served by %v", i, conns)
		}
	}
	// Without shared bindings each replica binds a session on its own, and
	// most sessions end up on two accounts.
	if moved > 2 {
		t.Errorf("%d of 16 sessions were served by more than one account across the replicas, want ≤ 2", moved)
	}
	singleShare, clusterShare := share(singleUp), share(up)
	t.Logf("prompt tokens read from cache: single account %.3f, two replicas alternating over 4 accounts %.3f (%.2f × single)",
		singleShare, clusterShare, clusterShare/singleShare)
	if clusterShare < 0.85*singleShare {
		t.Errorf("cluster cache share %.3f, want ≥ 0.85 × %.3f", clusterShare, singleShare)
	}
	for i := range 4 {
		if p := up.Peak(fmt.Sprintf("acct-%d", i), model); p > 3 {
			t.Errorf("account acct-%d peaked at %d in flight, above its cap 3", i, p)
		}
	}
}

// runAgentSessions runs 16 agent sessions of 8 growing turns, 8 at a time,
// turn n of each on gateway urls[n % len(urls)]; the even sessions send
// X-Claude-Code-Session-Id, the odd ones no session id. Every turn must
// succeed. It returns the connections (X-Gatehouse-Connection) that served
// each session.
func runAgentSessions(t *testing.T, urls []string, model string) []map[string]bool {
	t.Helper()
	const sessions, turns, parallel = 16, 8, 8
	tools, _ := json.Marshal([]map[string]any{{"name": "bash", "description": strings.Repeat("runs a shell command ", 40),
		"input_schema": map[string]any{"type": "object"}}})
	work := make(chan int, sessions)
	for i := range sessions {
		work <- i
	}
	close(work)
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	served := make([]map[string]bool, sessions)
	for i := range served {
		served[i] = map[string]bool{}
	}
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for i := range work {
				system := fmt.Sprintf("You are coding agent %d. ", i) + strings.Repeat("Follow the repository's rules. ", 48)
				var msgs []map[string]string
				for n := 1; n <= turns; n++ {
					msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("turn %d: %s", n, strings.Repeat("fix this file ", 24))})
					body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 64, "system": system, "tools": json.RawMessage(tools), "messages": msgs})
					req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, urls[n%len(urls)]+"/v1/messages", strings.NewReader(string(body)))
					req.Header.Set("Authorization", "Bearer sk-agents")
					if i%2 == 0 {
						req.Header.Set("X-Claude-Code-Session-Id", fmt.Sprintf("session-%d", i))
					}
					resp, err := hc.Do(req)
					if err != nil {
						t.Errorf("session %d turn %d: %v", i, n, err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					served[i][resp.Header.Get("X-Gatehouse-Connection")] = true
					if resp.StatusCode != http.StatusOK {
						t.Errorf("session %d turn %d: %d %s", i, n, resp.StatusCode, b)
					}
					msgs = append(msgs, map[string]string{"role": "assistant", "content": fmt.Sprintf("done with turn %d", n)})
				}
			}
		})
	}
	wg.Wait()
	return served
}
