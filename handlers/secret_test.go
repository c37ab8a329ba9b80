package handlers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// TestSecretsNeverLeak: an upstream key never appears in any response or log line; an
// API token's or client key's secret appears only in its creation response.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{gates: fakeGates{
		snapshot: func() live.Snapshot { return live.Snapshot{} },
		reset:    func(string) bool { return true },
	}})
	const upstreamKey = "sk-RECOGNISABLE-upstream-0123456789abcdef"
	body := connectionBody("secrets")
	body["apiKey"] = upstreamKey
	c := a.createConnection(t, body)
	id := c["id"].(string)

	a.do(t, call{method: http.MethodGet, path: path("connections")}).want(t, http.StatusOK)
	got := a.do(t, call{method: http.MethodGet, path: path("connections", id)}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPut, path: path("connections", id), body: got.body}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPatch, path: path("connections", id), body: `{"apiKey":"` + upstreamKey + `-2"}`}).
		want(t, http.StatusOK)
	// A rejected write that carries the key.
	a.do(t, call{method: http.MethodPatch, path: path("connections", id), invalidRequest: true,
		body: `{"apiKey":"` + upstreamKey + `","priority":"high"}`}).want(t, http.StatusUnprocessableEntity)
	a.do(t, call{method: http.MethodPost, path: path("connections"), body: body}).want(t, http.StatusConflict)

	tok := a.do(t, call{method: http.MethodPost, path: path("api-tokens"), body: `{"name":"leak-check","role":"admin"}`}).
		want(t, http.StatusCreated)
	tokSecret, _ := tok.json(t)["secret"].(string)
	key := a.do(t, call{method: http.MethodPost, path: path("client-keys"), body: `{"name":"leak-check"}`}).
		want(t, http.StatusCreated)
	keySecret, _ := key.json(t)["secret"].(string)
	if !strings.HasPrefix(tokSecret, "gh_at_") || !strings.HasPrefix(keySecret, "gh_ck_") {
		t.Fatalf("secrets %q, %q: want the store's prefixes", tokSecret, keySecret)
	}
	// The new token works, and its use leaves no trace of it.
	a.do(t, call{method: http.MethodGet, path: path("api-tokens"), token: tokSecret}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodGet, path: path("client-keys"), token: tokSecret}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodGet, path: path("audit") + "?limit=500"}).want(t, http.StatusOK)

	// An unexpected failure is logged; the log must not carry the token either.
	a.pool.Close()
	a.do(t, call{method: http.MethodGet, path: path("connections"), token: tokSecret}).want(t, http.StatusInternalServerError)
	logs := a.logs.String()
	if !strings.Contains(logs, "api request failed") {
		t.Errorf("the failure was not logged:\n%s", logs)
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range []string{upstreamKey, keySecret, tokSecret} {
		if strings.Contains(logs, s) {
			t.Errorf("a secret appears in the log:\n%s", logs)
		}
	}
	tokenSeen, keySeen := 0, 0
	for _, b := range a.bodies {
		if strings.Contains(b, upstreamKey) {
			t.Errorf("the upstream key appears in a response: %s", b)
		}
		if strings.Contains(b, tokSecret) {
			tokenSeen++
		}
		if strings.Contains(b, keySecret) {
			keySeen++
		}
	}
	if tokenSeen != 1 || keySeen != 1 {
		t.Errorf("token secret in %d responses, key secret in %d; want only their creation responses", tokenSeen, keySeen)
	}
}
