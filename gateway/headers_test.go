package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestUpstreamSeesOnlyAllowedHeaders: of a client's headers only the
// allowlist reaches the upstream, with the connection's credential instead of
// the client's; OpenAI-Organization / OpenAI-Project (which would pick another
// account under the stored key), cookies, the client's own credentials and
// anything else stay behind. In both API styles.
func TestUpstreamSeesOnlyAllowedHeaders(t *testing.T) {
	t.Parallel()
	allowed := map[string]string{
		"Content-Type":            "application/json",
		"Accept":                  "application/json",
		"User-Agent":              "OpenAI/Python 1.54.0",
		"Anthropic-Version":       "2023-06-01",
		"Anthropic-Beta":          "tools-2024-04-04",
		"Openai-Beta":             "assistants=v2",
		"Idempotency-Key":         "idem-42",
		"X-Stainless-Lang":        "python",
		"X-Stainless-Retry-Count": "0",
		"Traceparent":             "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"Tracestate":              "vendor=1",
	}
	refused := map[string]string{
		"Openai-Organization": "org-someone-else",
		"Openai-Project":      "proj-someone-else",
		"Cookie":              "session=secret",
		"Proxy-Authorization": "Basic c2VjcmV0",
		"X-Forwarded-For":     "203.0.113.9",
		"X-Custom":            "anything",
		"Accept-Encoding":     "gzip",
		"X-Mock-Latency-Ms":   "1",
	}
	tests := []struct {
		name, style, path, body string
		clientCred, credHeader  string // the client's credential header, the connection's
	}{
		{name: "openai", style: "openai", path: "/v1/chat/completions", body: chatBody("glm-5", false),
			clientCred: "Authorization", credHeader: "Authorization"},
		{name: "anthropic", style: "anthropic", path: "/v1/messages",
			body:       `{"model":"glm-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
			clientCred: "X-Api-Key", credHeader: "X-Api-Key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, upstreamtest.Options{RecordHeaders: true})
			c := e.conn("c1", "k1", "glm-5")
			c.APIStyle = tc.style
			e.gw.Apply(Config{Connections: []Connection{c}})
			var hdr []string
			for k, v := range allowed {
				hdr = append(hdr, k, v)
			}
			for k, v := range refused {
				hdr = append(hdr, k, v)
			}
			// The client's credential, and on the OpenAI route a second one
			// in x-api-key (Authorization wins there): neither may reach
			// the upstream.
			hdr = append(hdr, tc.clientCred, credValue(tc.clientCred, testClientKey))
			if tc.clientCred == "Authorization" {
				hdr = append(hdr, "X-Api-Key", "client-second-credential")
			}
			r := e.post(testCtx(t), tc.path, tc.body, hdr...)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			got := e.up.ReceivedHeaders()
			if len(got) != 1 {
				t.Fatalf("upstream saw %d requests, want 1", len(got))
			}
			h := got[0]
			for k, v := range allowed {
				if h.Get(k) != v {
					t.Errorf("allowed header %s: upstream saw %q, want %q", k, h.Get(k), v)
				}
			}
			if want := credValue(tc.credHeader, "k1"); h.Get(tc.credHeader) != want {
				t.Errorf("credential %s: upstream saw %q, want the connection's %q", tc.credHeader, h.Get(tc.credHeader), want)
			}
			for k := range h {
				if _, ok := allowed[k]; !ok && k != tc.credHeader && k != "Content-Length" {
					t.Errorf("upstream saw header %s: %q (not on the allowlist)", k, h[k])
				}
			}
			for _, v := range h {
				if strings.Contains(strings.Join(v, " "), testClientKey) || strings.Contains(strings.Join(v, " "), "client-second-credential") {
					t.Errorf("a client credential reached the upstream: %v", h)
				}
			}
		})
	}
}

// credValue is header k's value carrying secret.
func credValue(k, secret string) string {
	if k == "Authorization" {
		return "Bearer " + secret
	}
	return secret
}

// TestClientSeesOnlyAllowedResponseHeaders (issue 24, finding 10): of an
// upstream's response headers only DESIGN's allowlist reaches the client,
// on a relayed answer and on a failed one sent back as the last answer;
// Server, X-Upstream-*, CORS headers and the account's rate-limit headers
// stay behind.
func TestClientSeesOnlyAllowedResponseHeaders(t *testing.T) {
	t.Parallel()
	upHdr := http.Header{
		"Server":                         {"nginx/1.2"},
		"X-Upstream-Foo":                 {"bar"},
		"Access-Control-Allow-Origin":    {"*"},
		"X-Ratelimit-Remaining-Requests": {"41"},
		"Openai-Organization":            {"org-shared"},
		"X-Request-Id":                   {"req-42"},
		"Cache-Control":                  {"no-store"},
	}
	for _, tc := range []struct {
		name   string
		fail   upstreamtest.Failure
		status int
	}{{"relayed", "", http.StatusOK}, {"last answer", "500", http.StatusInternalServerError}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, upstreamtest.Options{})
			e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5")}})
			e.mustBehave("k1", upstreamtest.Behavior{Fail: tc.fail, Header: upHdr})
			r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false))
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			for _, k := range []string{"Server", "X-Upstream-Foo", "Access-Control-Allow-Origin",
				"X-Ratelimit-Remaining-Requests", "Openai-Organization"} {
				if v, ok := r.header[k]; ok {
					t.Errorf("upstream header %s: %q reached the client", k, v)
				}
			}
			for _, k := range []string{"X-Request-Id", "Cache-Control"} {
				if r.header.Get(k) != upHdr.Get(k) {
					t.Errorf("header %s = %q, want the upstream's %q", k, r.header.Get(k), upHdr.Get(k))
				}
			}
			if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
				t.Errorf("Content-Type = %q, want the upstream's JSON", r.header.Get("Content-Type"))
			}
		})
	}
}
