package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// testClock is a settable clock for the gateway's days.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestRPDPersistsInPostgres drives real HTTP through gateways wired as serve wires
// them (config loader, usage_daily through usageCounter) and checks that rpd is
// counted in Postgres: the count survives a restart, the API's budgets show it, and
// the next UTC day starts afresh.
func TestRPDPersistsInPostgres(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	logger := slog.New(slog.DiscardHandler)
	st, up, upSrv := storeAndUpstream(t, logger)
	conn, err := st.CreateConnection(ctx, "tester", store.ConnectionInput{
		Name: "limited", Provider: "zai", APIStyle: "openai", BaseURL: upSrv.URL + "/v1",
		APIKey: "sk-upstream-key-0001", Models: []string{"glm-5"}, Enabled: true,
		RateLimitOverrides: json.RawMessage(`{"rpd": 3}`),
	})
	if err != nil {
		t.Fatalf("CreateConnection: %v", err)
	}
	const clientKey = "client-key-for-rpd-test-0001"
	if _, err := st.EnsureClientKey(ctx, "test", clientKey); err != nil {
		t.Fatalf("EnsureClientKey: %v", err)
	}
	clock := &testClock{t: time.Date(2026, 5, 6, 22, 0, 0, 0, time.UTC)}

	// start runs a gateway process's worth of wiring and returns its URL.
	start := func() (*gateway.Gateway, string) {
		t.Helper()
		return startWired(t, st, gateway.Options{Logger: logger, Usage: usageCounter{st: st}, Now: clock.Now})
	}
	post := func(url string) (int, string) {
		t.Helper()
		status, code, _ := postChat(t, url, clientKey)
		return status, code
	}
	stored := func(day time.Time) int64 {
		t.Helper()
		m, err := st.UsageForDay(ctx, day)
		if err != nil {
			t.Fatalf("UsageForDay: %v", err)
		}
		return m[conn.ID].Requests
	}

	gw0, url := start()
	for i := range 3 {
		if status, code := post(url); status != http.StatusOK {
			t.Fatalf("request %d: %d %s, want 200", i+1, status, code)
		}
	}
	// The API/dashboard view carries each gate's wait histogram (the overview's p50/p99):
	// every admission through the connection gate is in it.
	found := false
	for _, g := range (gatesView{gw: gw0}).Snapshot().Gates {
		if g.Level == live.LevelConnection && g.ConnectionID == conn.ID {
			found = true
			if g.Admitted != 3 || g.Waits.Count() != 3 {
				t.Errorf("gate %s: admitted %d, waits counted %d; want 3 and 3", g.Key, g.Admitted, g.Waits.Count())
			}
		}
	}
	if !found {
		t.Errorf("the live view lists no connection gate of %s", conn.ID)
	}
	if status, code := post(url); status != http.StatusTooManyRequests || code != gateway.CodeRateLimitRPD {
		t.Fatalf("4th request: %d %s, want 429 %s", status, code, gateway.CodeRateLimitRPD)
	}
	if got := stored(clock.Now()); got != 3 {
		t.Errorf("usage_daily counts %d requests, want 3", got)
	}

	// A restarted process reads the day's count back.
	gw, url := start()
	midnight := time.Date(2026, 5, 7, 0, 0, 0, 0, time.UTC)
	want := map[string]live.Budget{live.BudgetRPD: {Limit: 3, Remaining: 0, ResetAt: midnight}}
	view := gatesView{gw: gw}.Snapshot()
	if len(view.Connections) != 1 {
		t.Fatalf("gates view lists %d connections, want 1", len(view.Connections))
	}
	if diff := cmp.Diff(want, view.Connections[0].Budgets); diff != "" {
		t.Errorf("budgets after restart mismatch (-want +got):\n%s", diff)
	}
	if status, code := post(url); status != http.StatusTooManyRequests || code != gateway.CodeRateLimitRPD {
		t.Fatalf("after restart: %d %s, want 429 %s", status, code, gateway.CodeRateLimitRPD)
	}
	if got := stored(clock.Now()); got != 3 {
		t.Errorf("usage_daily counts %d requests after the rejection, want 3", got)
	}
	if got := up.Requests("sk-upstream-key-0001", "glm-5"); got != 3 {
		t.Errorf("upstream saw %d requests, want 3", got)
	}

	// The next UTC day starts afresh.
	clock.Advance(3 * time.Hour)
	if status, code := post(url); status != http.StatusOK {
		t.Fatalf("next day: %d %s, want 200", status, code)
	}
	if got := stored(clock.Now()); got != 1 {
		t.Errorf("usage_daily counts %d requests on the next day, want 1", got)
	}
}

// TestKeyTPDPersistsInPostgres: a client key's tpd is counted in Postgres
// (usage_daily_keys through keyUsageCounter), wired as serve wires it: once the day's
// tokens leave too little of the budget for the next request's reservation (76 body
// bytes ÷ 4 + max_tokens 4 = 23 tokens, each request using 40) the key gets 429 RATE_LIMIT_TPD naming key-tpd:<id>, and a
// gateway started afresh on the same database refuses it too, while another key
// passes.
func TestKeyTPDPersistsInPostgres(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	logger := slog.New(slog.DiscardHandler)
	st, up, upSrv := storeAndUpstream(t, logger)
	if err := up.SetDefault(upstreamtest.Behavior{UsageTokens: 40}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateConnection(ctx, "tester", store.ConnectionInput{
		Name: "open", Provider: "zai", APIStyle: "openai", BaseURL: upSrv.URL + "/v1",
		APIKey: "sk-upstream-key-0002", Models: []string{"glm-5"}, Enabled: true,
	}); err != nil {
		t.Fatalf("CreateConnection: %v", err)
	}
	in := store.NewClientKeyInput("budgeted")
	in.Limits = json.RawMessage(`{"tpd": 100}`)
	budgeted, secret, err := st.CreateClientKey(ctx, "tester", in)
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := st.CreateClientKey(ctx, "tester", store.NewClientKeyInput("other"))
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{t: time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)}
	start := func() string {
		t.Helper()
		_, url := startWired(t, st, gateway.Options{Logger: logger, Usage: usageCounter{st: st}, KeyUsage: keyUsageCounter{st: st}, Now: clock.Now})
		return url
	}
	post := func(url, key string) (int, string, string) {
		t.Helper()
		return postChat(t, url, key)
	}
	url := start()
	for i := range 2 {
		if status, code, _ := post(url, secret); status != http.StatusOK {
			t.Fatalf("request %d: %d %s, want 200", i+1, status, code)
		}
	}
	wantGate := "key-tpd:" + budgeted.ID
	if status, code, gate := post(url, secret); status != http.StatusTooManyRequests || code != gateway.CodeRateLimitTPD || gate != wantGate {
		t.Fatalf("3rd request: %d %s at %q, want 429 %s at %s", status, code, gate, gateway.CodeRateLimitTPD, wantGate)
	}
	m, err := st.ClientKeyUsageForDay(ctx, clock.Now())
	if err != nil || m[budgeted.ID].Tokens != 80 {
		t.Fatalf("stored key usage = %+v, %v; want 80 tokens for the key", m, err)
	}

	// A restarted gateway knows the day's tokens from Postgres.
	url = start()
	if status, code, gate := post(url, secret); status != http.StatusTooManyRequests || code != gateway.CodeRateLimitTPD || gate != wantGate {
		t.Errorf("after a restart: %d %s at %q, want 429 %s at %s", status, code, gate, gateway.CodeRateLimitTPD, wantGate)
	}
	if status, code, _ := post(url, other); status != http.StatusOK {
		t.Errorf("other key after the restart: %d %s, want 200", status, code)
	}
}

// startWired runs a gateway process's worth of wiring over st (config loader, its
// key cache as Authenticate, one reload) with opts, and returns it with its URL.
func startWired(t *testing.T, st *store.Store, opts gateway.Options) (*gateway.Gateway, string) {
	t.Helper()
	loader := newConfigLoader(st, opts.Logger)
	opts.Authenticate = loader.authenticate
	gw := gateway.New(opts)
	loader.gw = gw
	if err := loader.reload(t.Context()); err != nil {
		t.Fatalf("reload: %v", err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(func() {
		srv.Close()
		gw.Close()
	})
	return gw, srv.URL
}

// postChat sends a small glm-5 chat completion (max_tokens 4, a reservation of 23 tokens) to the gateway at url with the client
// key key and returns the status, the error code and X-Gatehouse-Gate.
func postChat(t *testing.T, url, key string) (status int, code, gate string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(`{"model":"glm-5","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return resp.StatusCode, e.Error.Code, resp.Header.Get("X-Gatehouse-Gate")
}

// storeAndUpstream returns a store on a fresh test database and a fake upstream
// served over HTTP, both closed when t ends.
func storeAndUpstream(t *testing.T, logger *slog.Logger) (*store.Store, *upstreamtest.Server, *httptest.Server) {
	t.Helper()
	st, err := store.New(storetest.Pool(t), bytes.Repeat([]byte{0x42}, store.SecretKeySize), logger)
	if err != nil {
		t.Fatalf("store.New: %v", err)
	}
	up := upstreamtest.NewServer(upstreamtest.Options{})
	upSrv := httptest.NewServer(up)
	t.Cleanup(func() {
		_ = up.Close()
		upSrv.Close()
	})
	return st, up, upSrv
}
