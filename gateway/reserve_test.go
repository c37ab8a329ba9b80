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

// TestKeyTurnGivenBack (issue 23 item 7): a key's rpm turn taken for an
// attempt that is not dispatched goes back to the key. The key has rpm 1
// (one turn a minute) and its request is admitted to connection a, whose
// tpd cannot hold the reservation: the attempt is skipped and the request
// moves to b, where the key's turn is needed again (before: 429
// RATE_LIMIT_RPM at key-rpm:kr, the turn spent on a). And another key with
// rpm 1 whose request finds a's own turn too late gets 429 at rpm:a with its
// turn given back, so its next request is refused by a's turn again, not by
// its own.
func TestKeyTurnGivenBack(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		"sk-r": {ID: "kr", Name: "paced", Enabled: true, Limits: limits.ClientKeyLimits{RPM: ptr(1)}},
		"sk-s": {ID: "ks", Name: "paced too", Enabled: true, Limits: limits.ClientKeyLimits{RPM: ptr(1)}},
		"sk-o": {ID: "ko", Name: "other", Enabled: true},
	}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	a := e.conn("a", "ka", "glm-5")
	a.Priority = 10
	a.Overrides = limits.Overrides{TPD: ptr[int64](10)}
	b := e.conn("b", "kb", "glm-5")
	e.gw.Apply(Config{Connections: []Connection{a, b}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as("sk-r")...), "conn-b")

	// a dispatches once a minute and waits at most 100 ms; another key takes
	// its turn; b is gone.
	a.Overrides = limits.Overrides{RPM: ptr(1), MaxWaitMs: ptr(100)}
	e.gw.Apply(Config{Connections: []Connection{a}, ClientKeys: keyConfig(keys)})
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as("sk-o")...), "conn-a")
	for i := range 2 {
		r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as("sk-s")...)
		if r.status != http.StatusTooManyRequests || r.header.Get(HeaderGate) != "rpm:a" {
			t.Errorf("request %d of the paced key = %d at %q, want 429 at rpm:a (its own turn given back)", i+1, r.status, r.header.Get(HeaderGate))
		}
	}
}
