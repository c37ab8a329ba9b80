package gateway

import (
	"net/http"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestGeminiReservationUsesMaxOutputTokens: on a Gemini route the budget
// reservation's output bound is generationConfig.maxOutputTokens; a body
// without one reserves the settings' defaultOutputReserve (4096 by default,
// which a tpd of 1000 cannot hold: 429 RATE_LIMIT_TPD before dispatch; 50
// once set, which it can).
func TestGeminiReservationUsesMaxOutputTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{UsageTokens: 10})
	c := e.geminiConn("g1", "k1", "gemini-x")
	c.Overrides = limits.Overrides{TPD: ptr[int64](1000)}
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)
	const path = "/v1beta/models/gemini-x:generateContent"
	const bounded = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":100}}`

	if r := e.post(ctx, path, geminiBody); r.status != http.StatusTooManyRequests || r.header.Get(HeaderGate) != "tpd:g1" {
		t.Errorf("no output bound: %d at %q %s, want 429 at tpd:g1 (a reservation of 4096+ tokens)", r.status, r.header.Get(HeaderGate), r.body)
	}
	if r := e.post(ctx, path, bounded); r.status != http.StatusOK {
		t.Errorf("maxOutputTokens 100: %d %s, want 200", r.status, r.body)
	}
	e.gw.Apply(Config{Settings: limits.Settings{DefaultOutputReserve: ptr(50)}, Connections: []Connection{c}})
	if r := e.post(ctx, path, geminiBody); r.status != http.StatusOK {
		t.Errorf("no output bound, defaultOutputReserve 50: %d %s, want 200", r.status, r.body)
	}
	if got := e.up.Requests("k1", "gemini-x"); got != 2 {
		t.Errorf("upstream got %d requests, want 2 (the refused one never dispatched)", got)
	}
	if got := e.gw.Reserved(); got != 0 {
		t.Errorf("Reserved() = %d after every request ended, want 0", got)
	}
}
