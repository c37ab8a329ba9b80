package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// Requests the gateway refuses itself get the route's error shape, the
// right status and code, and never reach an upstream.
func TestClientRequestErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.MaxBodyBytes = 256 })
	oa := e.conn("oa", "k-oa", "glm-5")
	an := e.conn("an", "k-an", "claude-x")
	an.APIStyle, an.Provider = "anthropic", "anthropic"
	e.gw.Apply(Config{Connections: []Connection{oa, an}})
	big := `{"model":"glm-5","messages":[{"role":"user","content":"` + strings.Repeat("x", 300) + `"}]}`

	tests := []struct {
		name, method, path, body string
		status                   int
		shape, code, errType     string
		allow                    string
	}{
		{name: "unknown route", method: "POST", path: "/v1/nothing", body: chatBody("glm-5", false), status: 404, shape: "openai", code: CodeNotFound, errType: "not_found_error"},
		{name: "GET chat", method: "GET", path: "/v1/chat/completions", status: 405, shape: "openai", code: CodeMethodNotAllowed, errType: "invalid_request_error", allow: "POST"},
		{name: "PUT messages", method: "PUT", path: "/v1/messages", body: "{}", status: 405, shape: "anthropic", code: CodeMethodNotAllowed, errType: "invalid_request_error", allow: "POST"},
		{name: "POST models", method: "POST", path: "/v1/models", body: "{}", status: 405, shape: "openai", code: CodeMethodNotAllowed, errType: "invalid_request_error", allow: "GET, HEAD"},
		{name: "empty body openai", method: "POST", path: "/v1/embeddings", status: 400, shape: "openai", code: CodeInvalidRequest, errType: "invalid_request_error"},
		{name: "empty body anthropic", method: "POST", path: "/v1/messages", status: 400, shape: "anthropic", code: CodeInvalidRequest, errType: "invalid_request_error"},
		{name: "not json anthropic", method: "POST", path: "/v1/messages", body: "hello", status: 400, shape: "anthropic", code: CodeInvalidRequest, errType: "invalid_request_error"},
		{name: "no model anthropic", method: "POST", path: "/v1/messages", body: `{"max_tokens":1}`, status: 400, shape: "anthropic", code: CodeInvalidRequest, errType: "invalid_request_error"},
		{name: "too large openai", method: "POST", path: "/v1/responses", body: big, status: 413, shape: "openai", code: CodeBodyTooLarge, errType: "request_too_large"},
		{name: "too large anthropic", method: "POST", path: "/v1/messages", body: big, status: 413, shape: "anthropic", code: CodeBodyTooLarge, errType: "request_too_large"},
		{name: "unknown model openai", method: "POST", path: "/v1/completions", body: `{"model":"nope"}`, status: 404, shape: "openai", code: CodeModelNotFound, errType: "not_found_error"},
		{name: "anthropic model on openai route", method: "POST", path: "/v1/chat/completions", body: chatBody("anthropic/claude-x", false), status: 404, shape: "openai", code: CodeModelNotFound, errType: "not_found_error"},
		{name: "openai model on anthropic route", method: "POST", path: "/v1/messages", body: `{"model":"zai/glm-5","max_tokens":1}`, status: 404, shape: "anthropic", code: CodeModelNotFound, errType: "not_found_error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(testCtx(t), tc.method, e.gwURL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Api-Key", testClientKey)
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			r := reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			checkShape(t, r, tc.shape, tc.code)
			var eb errorBody
			if err := json.Unmarshal([]byte(r.body), &eb); err != nil || eb.Error.Type != tc.errType {
				t.Errorf("error.type = %q, want %q", eb.Error.Type, tc.errType)
			}
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow = %q, want %q", got, tc.allow)
			}
		})
	}
	if n := e.up.Stats().Total.Requests; n != 0 {
		t.Errorf("upstream got %d requests, want 0", n)
	}
}
