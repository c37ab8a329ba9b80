package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

func TestRoutingAliasBareAndUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 20 * time.Millisecond})
	c := e.conn("c1", "key-c1", "glm-5")
	c.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	var wg sync.WaitGroup
	statuses := make([]int, 6)
	for i := range statuses {
		model := "zai/glm-5"
		if i%2 == 0 {
			model = "glm-5"
		}
		wg.Go(func() { statuses[i] = e.post(ctx, "/v1/chat/completions", chatBody(model, false)).status })
	}
	wg.Wait()
	if diff := cmp.Diff([]int{200, 200, 200, 200, 200, 200}, statuses); diff != "" {
		t.Errorf("statuses mismatch (-want +got):\n%s", diff)
	}
	if got := e.up.Requests("key-c1", "glm-5"); got != 6 {
		t.Errorf("upstream saw %d requests for glm-5, want 6 (alias rewritten)", got)
	}
	if got := e.up.Requests("key-c1", "zai/glm-5"); got != 0 {
		t.Errorf("upstream saw the alias %d times", got)
	}
	if got := e.up.Peak("key-c1", "glm-5"); got != 1 {
		t.Errorf("peak = %d, want 1: alias and bare id share the glm-5 cap", got)
	}

	tests := []struct {
		name, path, body, wantShape string
	}{
		{name: "openai", path: "/v1/chat/completions", body: chatBody("nope", false), wantShape: "openai"},
		{name: "anthropic", path: "/v1/messages", body: `{"model":"glm-5","max_tokens":5,"messages":[]}`, wantShape: "anthropic"},
		{name: "unknown provider", path: "/v1/chat/completions", body: chatBody("other/glm-5", false), wantShape: "openai"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(ctx, tc.path, tc.body)
			if r.status != http.StatusNotFound {
				t.Fatalf("status %d, want 404: %s", r.status, r.body)
			}
			checkShape(t, r, tc.wantShape, "MODEL_NOT_FOUND")
		})
	}
}

// checkShape asserts the error body is in the given API's shape with code.
func checkShape(t *testing.T, r reply, shape, code string) {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.body), &raw); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	var eb errorBody
	_ = json.Unmarshal([]byte(r.body), &eb)
	switch shape {
	case "openai":
		if _, ok := raw["type"]; ok || eb.Error.Message == "" || eb.Error.Type == "" {
			t.Errorf("not an OpenAI error shape: %s", r.body)
		}
	case "anthropic":
		if eb.Type != "error" || eb.Error.Message == "" || eb.Error.Type == "" {
			t.Errorf("not an Anthropic error shape: %s", r.body)
		}
	}
	if eb.Error.Code != code {
		t.Errorf("error.code = %q, want %q", eb.Error.Code, code)
	}
}

func TestClientKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	oa := e.conn("oa", "upstream-openai-key", "glm-5")
	an := e.conn("an", "upstream-anthropic-key", "claude-x")
	an.APIStyle, an.Provider = "anthropic", "anthropic"
	e.gw.Apply(Config{Connections: []Connection{oa, an}})
	ctx := testCtx(t)
	msgBody := `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`

	tests := []struct {
		name, path, body, shape, code string
		auth                          []string // header, value
	}{
		{name: "openai missing", path: "/v1/chat/completions", body: chatBody("glm-5", false), shape: "openai", code: CodeMissingKey, auth: []string{"Authorization", ""}},
		{name: "openai wrong", path: "/v1/chat/completions", body: chatBody("glm-5", false), shape: "openai", code: CodeInvalidKey, auth: []string{"Authorization", "Bearer wrong"}},
		{name: "anthropic missing", path: "/v1/messages", body: msgBody, shape: "anthropic", code: CodeMissingKey, auth: []string{"Authorization", ""}},
		{name: "anthropic wrong x-api-key", path: "/v1/messages", body: msgBody, shape: "anthropic", code: CodeInvalidKey, auth: []string{"Authorization", "", "X-Api-Key", "wrong"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(ctx, tc.path, tc.body, tc.auth...)
			if r.status != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", r.status)
			}
			checkShape(t, r, tc.shape, tc.code)
		})
	}
	if n := e.up.Stats().Total.Requests; n != 0 {
		t.Fatalf("upstream got %d requests from unauthenticated clients", n)
	}

	if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)); r.status != http.StatusOK {
		t.Fatalf("openai with key: %d %s", r.status, r.body)
	}
	r := e.post(ctx, "/v1/messages", msgBody, "Authorization", "", "X-Api-Key", testClientKey, "Anthropic-Version", "2023-06-01")
	if r.status != http.StatusOK {
		t.Fatalf("anthropic with x-api-key: %d %s", r.status, r.body)
	}
	if got := r.header.Get(HeaderConnection); got != "conn-an" {
		t.Errorf("%s = %q, want conn-an", HeaderConnection, got)
	}
	if e.up.SawKey(testClientKey) {
		t.Error("upstream saw the client's key")
	}
	for _, k := range []string{"upstream-openai-key", "upstream-anthropic-key"} {
		if !e.up.SawKey(k) {
			t.Errorf("upstream never saw connection key %s", k)
		}
	}
}

func TestModelsList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	a := e.conn("a", "ka", "glm-5", "glm-4.7")
	b := e.conn("b", "kb", "gpt-x")
	b.Provider = "openai"
	off := e.conn("off", "ko", "hidden")
	off.Enabled = false
	e.gw.Apply(Config{Connections: []Connection{a, b, off}})
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodGet, e.gwURL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+testClientKey)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	want := []string{"glm-4.7", "glm-5", "gpt-x", "openai/gpt-x", "zai/glm-4.7", "zai/glm-5"}
	if diff := cmp.Diff(want, ids); diff != "" || list.Object != "list" {
		t.Errorf("models mismatch (-want +got):\n%s (object %q)", diff, list.Object)
	}
}

// GET /v1/models/{id} (the SDKs' models.retrieve) answers one entry of the list, by
// either name; a model no enabled connection serves is 404 MODEL_NOT_FOUND.
func TestModelRetrieve(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	off := e.conn("off", "ko", "hidden")
	off.Enabled = false
	e.gw.Apply(Config{Connections: []Connection{e.conn("a", "ka", "glm-5"), off}})
	tests := []struct {
		name, method, path string
		status             int
		wantID, wantCode   string
	}{
		{name: "bare id", method: "GET", path: "/v1/models/glm-5", status: 200, wantID: "glm-5"},
		{name: "provider/model", method: "GET", path: "/v1/models/zai/glm-5", status: 200, wantID: "zai/glm-5"},
		{name: "escaped slash", method: "GET", path: "/v1/models/zai%2Fglm-5", status: 200, wantID: "zai/glm-5"},
		{name: "head", method: "HEAD", path: "/v1/models/glm-5", status: 200},
		{name: "disabled connection's model", method: "GET", path: "/v1/models/hidden", status: 404, wantCode: CodeModelNotFound},
		{name: "unknown", method: "GET", path: "/v1/models/nope", status: 404, wantCode: CodeModelNotFound},
		{name: "post", method: "POST", path: "/v1/models/glm-5", status: 405, wantCode: CodeMethodNotAllowed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(testCtx(t), tc.method, e.gwURL+tc.path, nil)
			req.Header.Set("Authorization", "Bearer "+testClientKey)
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			var doc struct {
				ID      string `json:"id"`
				Object  string `json:"object"`
				OwnedBy string `json:"owned_by"`
				Error   struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if len(body) > 0 {
				if err := json.Unmarshal(body, &doc); err != nil {
					t.Fatalf("body %q: %v", body, err)
				}
			}
			switch {
			case tc.wantID != "" && (doc.ID != tc.wantID || doc.Object != "model" || doc.OwnedBy != "zai"):
				t.Errorf("model = %+v, want id %q, object model, owned_by zai", doc, tc.wantID)
			case tc.wantCode != "" && doc.Error.Code != tc.wantCode:
				t.Errorf("error code %q, want %q: %s", doc.Error.Code, tc.wantCode, body)
			case tc.method == "HEAD" && len(body) != 0:
				t.Errorf("HEAD answered a body: %q", body)
			}
		})
	}
}

func TestNotReadyAndBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	ctx := testCtx(t)
	if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)); r.status != http.StatusServiceUnavailable {
		t.Errorf("before Apply: status %d, want 503", r.status)
	}
	if ok, _ := e.gw.Loaded(); ok {
		t.Error("Loaded before Apply")
	}
	e.gw.Apply(Config{Connections: []Connection{e.conn("c", "k", "glm-5")}})
	if ok, at := e.gw.Loaded(); !ok || at.IsZero() {
		t.Error("not Loaded after Apply")
	}
	tests := []struct {
		name, body string
		status     int
		code       string
	}{
		{name: "not json", body: `nope`, status: 400, code: CodeInvalidRequest},
		{name: "no model", body: `{"messages":[]}`, status: 400, code: CodeInvalidRequest},
		{name: "model not a string", body: `{"model":5}`, status: 400, code: CodeInvalidRequest},
		{name: "two models", body: `{"model":"glm-5","model":"x"}`, status: 400, code: CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(ctx, "/v1/chat/completions", tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			checkShape(t, r, "openai", tc.code)
		})
	}
}

// readEvents reads an SSE body and reports the data lines.
func sseData(body string) []string {
	var out []string
	for line := range strings.SplitSeq(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}
