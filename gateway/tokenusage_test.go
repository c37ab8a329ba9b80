package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestTokenUsageEveryRoute sends one request per route and shape through the
// gateway to a connection with a tpm limit, and checks the tokens charged
// (the fake upstream reports 60 per answer) and what the client received.
func TestTokenUsageEveryRoute(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		style     string
		path      string
		body      string
		wantUsage bool // the client's body carries a usage object
	}{
		{name: "chat", path: "/v1/chat/completions", body: chatBody("glm-5", false), wantUsage: true},
		{name: "chat stream, usage not asked for", path: "/v1/chat/completions", body: chatBody("glm-5", true)},
		{name: "chat stream, usage asked for", path: "/v1/chat/completions", wantUsage: true,
			body: `{"model":"glm-5","stream":true,"stream_options":{"include_usage":true},"messages":[]}`},
		{name: "completions stream", path: "/v1/completions", body: `{"model":"glm-5","prompt":"hi","stream":true}`},
		{name: "embeddings", path: "/v1/embeddings", body: `{"model":"glm-5","input":"hi"}`, wantUsage: true},
		{name: "responses", path: "/v1/responses", body: `{"model":"glm-5","input":"hi"}`, wantUsage: true},
		{name: "responses stream", path: "/v1/responses", body: `{"model":"glm-5","input":"hi","stream":true}`, wantUsage: true},
		{name: "messages", style: "anthropic", path: "/v1/messages", wantUsage: true,
			body: `{"model":"glm-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages stream", style: "anthropic", path: "/v1/messages", wantUsage: true,
			body: `{"model":"glm-5","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, upstreamtest.Options{UsageTokens: 60})
			c := e.conn("c1", "k1", "glm-5")
			if tc.style != "" {
				c.APIStyle = tc.style
			}
			c.Overrides = limits.Overrides{TPM: ptr[int64](1000)}
			e.gw.Apply(Config{Connections: []Connection{c}})
			r := e.post(testCtx(t), tc.path, tc.body, "Accept-Encoding", "gzip")
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if got := e.health("c1").Budgets[live.BudgetTPM].Remaining; got != 940 {
				t.Errorf("tpm remaining = %d, want 940 (60 tokens charged)", got)
			}
			if got := strings.Contains(r.body, `"usage":{`); got != tc.wantUsage {
				t.Errorf("client body has a usage object: %v, want %v\n%s", got, tc.wantUsage, r.body)
			}
			if strings.Contains(tc.body, `"stream":true`) && tc.style == "" && tc.path != "/v1/responses" &&
				!strings.HasSuffix(r.body, "data: [DONE]\n\n") {
				t.Errorf("stream does not end with [DONE]:\n%s", r.body)
			}
		})
	}
}
