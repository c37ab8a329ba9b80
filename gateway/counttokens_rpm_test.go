package gateway

import (
	"net/http"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestCountRoutesTakeTheKeysRPMTurn: a key with rpm 6 (one request every 10 s) may
// not count tokens faster than that: /v1/messages/count_tokens and Gemini's
// :countTokens are served once, then 429 RATE_LIMIT_RPM at the key's gate (the
// connection's wait bound of 200 ms is shorter than the turn) — while they still
// take no slot and no connection rpm (a connection rpm of 1 does not stop them,
// and the connection's gate admits nothing).
func TestCountRoutesTakeTheKeysRPMTurn(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		"sk-anthropic-count": {ID: "ka", Name: "a", Enabled: true, Limits: limits.ClientKeyLimits{RPM: ptr(6)}},
		"sk-gemini-count-00": {ID: "kg", Name: "g", Enabled: true, Limits: limits.ClientKeyLimits{RPM: ptr(6)}},
		testClientKey:        {ID: "test-key", Name: "test", Enabled: true},
	}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	a := e.conn("c1", "k1", "claude-x")
	a.APIStyle = "anthropic"
	a.Overrides = caps(1, nil, 200)
	a.Overrides.RPM = ptr(1)
	g := e.geminiConn("g1", "k2", "gemini-x")
	g.Overrides = caps(1, nil, 200)
	g.Overrides.RPM = ptr(1)
	e.gw.Apply(Config{Connections: []Connection{a, g}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)
	countBody := `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests, http.StatusTooManyRequests} {
		r := e.post(ctx, "/v1/messages/count_tokens", countBody, append(as("sk-anthropic-count"), "anthropic-version", "2023-06-01")...)
		if r.status != want {
			t.Fatalf("count_tokens %d: %d %s, want %d", i, r.status, r.body, want)
		}
		if want == http.StatusTooManyRequests {
			if code := r.errorCode(t); code != CodeRateLimitRPM || r.header.Get("X-Gatehouse-Gate") != "key-rpm:ka" || r.header.Get("Retry-After") == "" {
				t.Errorf("count_tokens %d: code %s, gate %q, Retry-After %q; want %s at key-rpm:ka with a Retry-After",
					i, code, r.header.Get("X-Gatehouse-Gate"), r.header.Get("Retry-After"), CodeRateLimitRPM)
			}
		}
	}
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		r := e.gemini(ctx, http.MethodPost, "/v1beta/models/gemini-x:countTokens", "X-Goog-Api-Key", "sk-gemini-count-00")
		if r.status != want {
			t.Fatalf(":countTokens %d: %d %s, want %d", i, r.status, r.body, want)
		}
	}
	// A key without an rpm counts as often as it likes: the connections' rpm
	// of 1 is not spent by counting.
	for i := range 3 {
		if r := e.post(ctx, "/v1/messages/count_tokens", countBody, "anthropic-version", "2023-06-01"); r.status != http.StatusOK {
			t.Errorf("count_tokens %d of a key without rpm: %d %s, want 200", i, r.status, r.body)
		}
		if r := e.gemini(ctx, http.MethodPost, "/v1beta/models/gemini-x:countTokens"); r.status != http.StatusOK {
			t.Errorf(":countTokens %d of a key without rpm: %d %s, want 200", i, r.status, r.body)
		}
	}
	for _, gate := range []string{"connection:c1", "connection:g1"} {
		if got := e.gate(gate).Admitted; got != 0 {
			t.Errorf("%s admitted %d, want 0 (count routes take no slot)", gate, got)
		}
	}
}
