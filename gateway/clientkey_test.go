package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// withKeys makes the gateway authenticate the secrets of keys (and nothing else).
func withKeys(keys map[string]ClientKey) envOption {
	return func(o *Options) {
		o.Authenticate = func(_ context.Context, s string) (ClientKey, bool) {
			k, ok := keys[s]
			return k, ok
		}
	}
}

// as is the Authorization header of a client key's secret, for env.post.
func as(secret string) []string { return []string{"Authorization", "Bearer " + secret} }

func keyConfig(keys map[string]ClientKey) []ClientKey {
	out := make([]ClientKey, 0, len(keys))
	for _, k := range keys {
		out = append(out, k)
	}
	return out
}

// TestClientKeyForbidden: a disabled key gets 403 KEY_DISABLED and a model outside a
// key's models 403 MODEL_NOT_ALLOWED, in the OpenAI shape on the OpenAI routes and in
// the Anthropic shape on /v1/messages; an allowed model goes through. Each answer is
// counted in gatehouse_client_requests_total under the key's name.
func TestClientKeyForbidden(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		"sk-off":  {ID: "k-off", Name: "off", Enabled: false},
		"sk-zai":  {ID: "k-zai", Name: "zai-only", Enabled: true, Limits: limits.ClientKeyLimits{Models: []string{"zai/*", "claude-x"}}},
		"sk-none": {ID: "k-none", Name: "glm-4.7-only", Enabled: true, Limits: limits.ClientKeyLimits{Models: []string{"glm-4.7"}}},
	}
	reg := prometheus.NewRegistry()
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys), func(o *Options) { o.Registerer = reg })
	an := e.conn("an", "k2", "claude-x")
	an.APIStyle, an.Provider = "anthropic", "anthropic"
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5"), an}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)
	messages := `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`

	tests := []struct {
		name, secret, path, body string
		status                   int
		code                     string
	}{
		{"disabled, OpenAI shape", "sk-off", "/v1/chat/completions", chatBody("glm-5", false), 403, CodeKeyDisabled},
		{"disabled, Anthropic shape", "sk-off", "/v1/messages", messages, 403, CodeKeyDisabled},
		{"model not allowed, OpenAI shape", "sk-none", "/v1/chat/completions", chatBody("glm-5", false), 403, CodeModelNotAllowed},
		{"model not allowed, Anthropic shape", "sk-none", "/v1/messages", messages, 403, CodeModelNotAllowed},
		{"provider/* allows the provider's models", "sk-zai", "/v1/chat/completions", chatBody("glm-5", false), 200, ""},
		{"provider/* allows the qualified name", "sk-zai", "/v1/chat/completions", chatBody("zai/glm-5", false), 200, ""},
		{"a bare id allows it", "sk-zai", "/v1/messages", messages, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.post(ctx, tt.path, tt.body, as(tt.secret)...)
			if r.status != tt.status {
				t.Fatalf("status = %d, want %d; body %s", r.status, tt.status, r.body)
			}
			if tt.code == "" {
				return
			}
			var eb errorBody
			if err := json.Unmarshal([]byte(r.body), &eb); err != nil {
				t.Fatal(err)
			}
			if eb.Error.Code != tt.code {
				t.Errorf("code = %q, want %q (%s)", eb.Error.Code, tt.code, r.body)
			}
			if anthropic := strings.HasPrefix(tt.path, "/v1/messages"); anthropic != (eb.Type == "error") {
				t.Errorf("error shape of %s = %s, want the %s shape", tt.path, r.body, map[bool]string{true: "Anthropic", false: "OpenAI"}[anthropic])
			}
		})
	}
	if got := counter(t, e.gw.metrics.ClientRequests.WithLabelValues("off", "403")); got != 2 {
		t.Errorf(`gatehouse_client_requests_total{client="off",status="403"} = %v, want 2`, got)
	}
	if got := counter(t, e.gw.metrics.ClientRequests.WithLabelValues("zai-only", "200")); got != 3 {
		t.Errorf(`gatehouse_client_requests_total{client="zai-only",status="200"} = %v, want 3`, got)
	}
	for _, name := range []string{"off", "zai-only", "glm-4.7-only"} {
		for _, metric := range []string{"gatehouse_client_inflight", "gatehouse_client_queued"} {
			if v, ok := metricValue(t, reg, metric, map[string]string{"client": name}); !ok || v != 0 {
				t.Errorf("%s{client=%q} = %v (present %v), want 0", metric, name, v, ok)
			}
		}
	}
}

// TestClientKeyGateCapsTheKey: a key with maxConcurrent 2 never has more than 2
// requests at the upstream (the fake upstream counts the peak per model, and each key
// uses a model of its own), its excess waits on gate key:<id>, and another key's
// requests pass it by; a key's own maxWaitMs bounds the wait at its gate (429
// SEMAPHORE_TIMEOUT naming key:<id>).
func TestClientKeyGateCapsTheKey(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		"sk-a": {ID: "ka", Name: "a", Enabled: true, Limits: limits.ClientKeyLimits{MaxConcurrent: ptr(2)}},
		"sk-b": {ID: "kb", Name: "b", Enabled: true},
		"sk-c": {ID: "kc", Name: "c", Enabled: true, Limits: limits.ClientKeyLimits{MaxConcurrent: ptr(1), MaxWaitMs: ptr(1)}},
	}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	hold := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	c := e.conn("c1", "k1", "glm-5", "glm-4.7", "glm-c")
	c.Overrides = caps(0, nil, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)

	done := make(chan reply, 16)
	for range 6 {
		go func() { done <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as("sk-a")...) }()
	}
	waitFor(t, 10*time.Second, "2 of key a's requests in flight and 4 queued on key:ka", func() bool {
		g := e.gate("key:ka")
		return g.InFlight == 2 && g.Queued == 4 && g.Level == "key"
	})
	for range 3 {
		go func() { done <- e.post(ctx, "/v1/chat/completions", chatBody("glm-4.7", false), as("sk-b")...) }()
	}
	waitFor(t, 10*time.Second, "key b's 3 requests at the upstream beside key a's 2", func() bool {
		return e.up.Stats().Total.InFlight == 5
	})
	snap := e.gw.Snapshot()
	var a, b bool
	for _, cl := range snap.Clients {
		switch cl.ID {
		case "ka":
			a = cl.InFlight == 2 && cl.Queued == 4 && cl.Cap == 2 && cl.Weight == 1
		case "kb":
			b = cl.InFlight == 3 && cl.Queued == 0 && cl.Cap == 0
		}
	}
	if !a || !b {
		t.Errorf("live clients = %+v, want a 2 in flight + 4 queued (cap 2), b 3 in flight", snap.Clients)
	}

	// Key c: one request holds its only slot; the next may wait 1 ms at key:kc.
	go func() { done <- e.post(ctx, "/v1/chat/completions", chatBody("glm-c", false), as("sk-c")...) }()
	waitFor(t, 10*time.Second, "key c's first request in flight", func() bool { return e.gate("key:kc").InFlight == 1 })
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-c", false), as("sk-c")...)
	if r.status != http.StatusTooManyRequests || r.errorCode(t) != "SEMAPHORE_TIMEOUT" || r.header.Get("X-Gatehouse-Gate") != "key:kc" {
		t.Errorf("second request of key c = %d %s (gate %q), want 429 SEMAPHORE_TIMEOUT at key:kc",
			r.status, r.body, r.header.Get("X-Gatehouse-Gate"))
	}

	close(hold)
	for range 10 {
		if r := <-done; r.status != http.StatusOK {
			t.Errorf("status = %d, want 200: %s", r.status, r.body)
		}
	}
	if p := e.up.Peak("k1", "glm-5"); p != 2 {
		t.Errorf("peak of key a's requests at the upstream = %d, want its cap 2", p)
	}
	if p := e.up.Peak("k1", "glm-4.7"); p != 3 {
		t.Errorf("peak of key b's requests at the upstream = %d, want 3 (key a's cap is not b's)", p)
	}
}

// TestClientKeyRPMSpacesOnlyThatKey: a key with rpm 60 dispatches one request per
// second: of two requests sent together with a wait bound of 100 ms, one is
// dispatched and the other is answered 429 RATE_LIMIT_RPM naming key-rpm:<id> (its
// turn comes a second later); meanwhile another key's requests all go through at once.
// Counted at the upstream, not timed.
func TestClientKeyRPMSpacesOnlyThatKey(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		"sk-slow": {ID: "kslow", Name: "slow", Enabled: true, Limits: limits.ClientKeyLimits{RPM: ptr(60), MaxWaitMs: ptr(100)}},
		"sk-fast": {ID: "kfast", Name: "fast", Enabled: true},
	}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5", "glm-4.7")}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)

	slow := make(chan reply, 2)
	for range 2 {
		go func() { slow <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as("sk-slow")...) }()
	}
	for i := range 5 {
		if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-4.7", false), as("sk-fast")...); r.status != http.StatusOK {
			t.Fatalf("fast key request %d = %d %s, want 200", i, r.status, r.body)
		}
	}
	var ok, limited int
	for range 2 {
		r := <-slow
		switch {
		case r.status == http.StatusOK:
			ok++
		case r.status == http.StatusTooManyRequests && r.errorCode(t) == CodeRateLimitRPM && r.header.Get("X-Gatehouse-Gate") == "key-rpm:kslow":
			limited++
		default:
			t.Errorf("slow key answer = %d %s (gate %q)", r.status, r.body, r.header.Get("X-Gatehouse-Gate"))
		}
	}
	if ok != 1 || limited != 1 {
		t.Errorf("slow key: %d dispatched, %d answered RATE_LIMIT_RPM; want 1 and 1", ok, limited)
	}
	st := e.up.Stats()
	if st.ByModel["glm-5"].Requests != 1 || st.ByModel["glm-4.7"].Requests != 5 {
		t.Errorf("upstream requests: slow key %d, fast key %d; want 1 and 5",
			st.ByModel["glm-5"].Requests, st.ByModel["glm-4.7"].Requests)
	}
}

// TestClientKeyTPDExhausted: a key with tpd 100 whose requests reserve 23
// tokens (76 body bytes ÷ 4 + max_tokens 4) and use 40 each is served until
// the day's 80 tokens leave too little for the next reservation, then answered 429 RATE_LIMIT_TPD naming
// key-tpd:<id>, while another key is still served; its tokens are counted in
// gatehouse_client_tokens_total.
func TestClientKeyTPDExhausted(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		"sk-t": {ID: "kt", Name: "budgeted", Enabled: true, Limits: limits.ClientKeyLimits{TPD: ptr(int64(100))}},
		"sk-u": {ID: "ku", Name: "other", Enabled: true},
	}
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys), withClock(clock))
	if err := e.up.SetDefault(upstreamtest.Behavior{UsageTokens: 40}); err != nil {
		t.Fatal(err)
	}
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5")}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)
	for i := range 2 {
		if r := e.post(ctx, "/v1/chat/completions", chatBodyMax("glm-5", 4), as("sk-t")...); r.status != http.StatusOK {
			t.Fatalf("request %d = %d %s, want 200", i, r.status, r.body)
		}
	}
	r := e.post(ctx, "/v1/chat/completions", chatBodyMax("glm-5", 4), as("sk-t")...)
	if r.status != http.StatusTooManyRequests || r.errorCode(t) != CodeRateLimitTPD || r.header.Get("X-Gatehouse-Gate") != "key-tpd:kt" {
		t.Errorf("third request = %d %s (gate %q), want 429 RATE_LIMIT_TPD at key-tpd:kt", r.status, r.body, r.header.Get("X-Gatehouse-Gate"))
	}
	if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as("sk-u")...); r.status != http.StatusOK {
		t.Errorf("other key = %d %s, want 200: the budget is the key's, not the connection's", r.status, r.body)
	}
	if got := e.up.Stats().Total.Requests; got != 3 {
		t.Errorf("upstream requests = %d, want 3 (the refused one never dispatched)", got)
	}
	in := counter(t, e.gw.metrics.ClientTokens.WithLabelValues("budgeted", "input"))
	out := counter(t, e.gw.metrics.ClientTokens.WithLabelValues("budgeted", "output"))
	if in+out != 80 {
		t.Errorf("gatehouse_client_tokens_total of the key = %v in + %v out, want 80 together", in, out)
	}
	// A new UTC day starts the budget afresh.
	clock.Advance(24 * time.Hour)
	if r := e.post(ctx, "/v1/chat/completions", chatBodyMax("glm-5", 4), as("sk-t")...); r.status != http.StatusOK {
		t.Errorf("request the next day = %d %s, want 200", r.status, r.body)
	}
}

// counter reads one counter's value.
func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
