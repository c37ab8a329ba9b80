package gateway

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestFoldedModelKeyRejected: a key allowed only cheap-m cannot reach premium-m by
// adding a key that case-folds to "model" (the fake upstream decodes bodies with
// encoding/json, which matches keys case-insensitively, as the attack needs): each
// such body is 400 INVALID_REQUEST and nothing reaches the upstream; the plain body
// goes through to cheap-m.
func TestFoldedModelKeyRejected(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		"sk-cheap": {ID: "k-cheap", Name: "cheap", Enabled: true, Limits: limits.ClientKeyLimits{Models: []string{"cheap-m"}}},
	}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "cheap-m", "premium-m")}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)
	for _, body := range []string{
		`{"model":"cheap-m","MODEL":"premium-m","messages":[{"role":"user","content":"hi"}]}`,
		`{"Model":"premium-m","model":"cheap-m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"cheap-m","mOdEl":"premium-m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"cheap-m","\u004dodel":"premium-m","messages":[{"role":"user","content":"hi"}]}`,
	} {
		for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
			r := e.post(ctx, path, body, as("sk-cheap")...)
			if r.status != http.StatusBadRequest || r.errorCode(t) != CodeInvalidRequest {
				t.Errorf("%s %s: %d %s, want 400 %s", path, body, r.status, r.body, CodeInvalidRequest)
			}
		}
	}
	if n := e.up.Stats().Total.Requests; n != 0 {
		t.Fatalf("the upstream got %d requests from case-folded model bodies, want 0", n)
	}
	if r := e.post(ctx, "/v1/chat/completions", chatBody("cheap-m", false), as("sk-cheap")...); r.status != http.StatusOK {
		t.Fatalf("plain cheap-m: %d %s", r.status, r.body)
	}
	if n, p := e.up.Requests("k1", "cheap-m"), e.up.Requests("k1", "premium-m"); n != 1 || p != 0 {
		t.Errorf("upstream requests cheap-m %d premium-m %d, want 1 and 0", n, p)
	}
}

// TestModelsListedForKey: GET /v1/models shows a key with a models list only the
// models it may use (bare ids and provider/model names, patterns as for requests), and
// GET /v1/models/{id} of another model is 404 to it; a key without a list sees all.
func TestModelsListedForKey(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		"sk-cheap": {ID: "k-cheap", Name: "cheap", Enabled: true, Limits: limits.ClientKeyLimits{Models: []string{"cheap-m"}}},
		"sk-oa":    {ID: "k-oa", Name: "oa", Enabled: true, Limits: limits.ClientKeyLimits{Models: []string{"openai/*"}}},
		"sk-all":   {ID: "k-all", Name: "all", Enabled: true},
	}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	b := e.conn("b", "kb", "gpt-x")
	b.Provider = "openai"
	e.gw.Apply(Config{Connections: []Connection{e.conn("a", "ka", "cheap-m", "premium-m"), b}, ClientKeys: keyConfig(keys)})
	list := func(secret string) []string {
		t.Helper()
		r := e.send(testCtx(t), http.MethodGet, "/v1/models", "", as(secret)...)
		if r.status != http.StatusOK {
			t.Fatalf("GET /v1/models as %s: %d %s", secret, r.status, r.body)
		}
		var l struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(r.body), &l); err != nil {
			t.Fatalf("list %q: %v", r.body, err)
		}
		ids := []string{}
		for _, d := range l.Data {
			ids = append(ids, d.ID)
		}
		return ids
	}
	for secret, want := range map[string][]string{
		"sk-cheap": {"cheap-m", "zai/cheap-m"},
		"sk-oa":    {"gpt-x", "openai/gpt-x"},
		"sk-all":   {"cheap-m", "gpt-x", "openai/gpt-x", "premium-m", "zai/cheap-m", "zai/premium-m"},
	} {
		if diff := cmp.Diff(want, list(secret)); diff != "" {
			t.Errorf("models of %s (-want +got):\n%s", secret, diff)
		}
	}
	for _, tc := range []struct {
		secret, id string
		status     int
	}{
		{"sk-cheap", "cheap-m", 200},
		{"sk-cheap", "zai/cheap-m", 200},
		{"sk-cheap", "premium-m", 404},
		{"sk-cheap", "openai/gpt-x", 404},
		{"sk-all", "premium-m", 200},
	} {
		r := e.send(testCtx(t), http.MethodGet, "/v1/models/"+tc.id, "", as(tc.secret)...)
		if r.status != tc.status {
			t.Errorf("GET /v1/models/%s as %s: %d %s, want %d", tc.id, tc.secret, r.status, r.body, tc.status)
		}
	}
}
