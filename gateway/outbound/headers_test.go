package outbound

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCopyRequestHeader: only allowlisted client headers go upstream, less
// any the client's Connection header names as hop-by-hop.
func TestCopyRequestHeader(t *testing.T) {
	t.Parallel()
	src := http.Header{
		"Authorization":           {"Bearer client-secret"},
		"X-Api-Key":               {"client-secret"},
		"Cookie":                  {"a=1"},
		"Openai-Organization":     {"org-1"},
		"Accept-Encoding":         {"gzip"},
		"Content-Type":            {"application/json"},
		"User-Agent":              {"sdk/1"},
		"Anthropic-Version":       {"2023-06-01"},
		"X-Stainless-Retry-Count": {"0"},
		"X-Stainless-":            {"bare prefix"},
		"Idempotency-Key":         {"k1"},
		"Connection":              {"keep-alive, Idempotency-Key"},
		"X-Made-Up":               {"v"},
	}
	dst := http.Header{}
	CopyRequestHeader(dst, src)
	want := http.Header{
		"Content-Type":            {"application/json"},
		"User-Agent":              {"sdk/1"},
		"Anthropic-Version":       {"2023-06-01"},
		"X-Stainless-Retry-Count": {"0"},
	}
	if diff := cmp.Diff(want, dst); diff != "" {
		t.Errorf("headers sent upstream mismatch (-want +got):\n%s", diff)
	}
}

// TestCopyResponseHeader: of the upstream's response headers only the
// allowlist reaches the client (issue 24, finding 10): not hop-by-hop
// headers, cookies, Server, CORS, the account's rate-limit headers or
// organisation ids, nor anything else.
func TestCopyResponseHeader(t *testing.T) {
	t.Parallel()
	src := http.Header{
		"Content-Type":                         {"text/event-stream"},
		"Content-Length":                       {"12"},
		"Cache-Control":                        {"no-cache"},
		"X-Request-Id":                         {"req-1"},
		"Request-Id":                           {"req-2"},
		"Openai-Processing-Ms":                 {"7"},
		"Retry-After":                          {"3"},
		"Set-Cookie":                           {"a=1"},
		"Transfer-Encoding":                    {"chunked"},
		"Keep-Alive":                           {"timeout=5"},
		"Connection":                           {"x-trace"},
		"X-Trace":                              {"t1"},
		"Server":                               {"nginx/1.2"},
		"X-Upstream-Foo":                       {"bar"},
		"Access-Control-Allow-Origin":          {"*"},
		"Openai-Organization":                  {"org-1"},
		"X-Ratelimit-Remaining-Requests":       {"3"},
		"Anthropic-Ratelimit-Tokens-Remaining": {"9"},
	}
	dst := http.Header{}
	CopyResponseHeader(dst, src)
	want := http.Header{
		"Content-Type":         {"text/event-stream"},
		"Content-Length":       {"12"},
		"Cache-Control":        {"no-cache"},
		"X-Request-Id":         {"req-1"},
		"Request-Id":           {"req-2"},
		"Openai-Processing-Ms": {"7"},
		"Retry-After":          {"3"},
	}
	if diff := cmp.Diff(want, dst); diff != "" {
		t.Errorf("headers relayed to the client mismatch (-want +got):\n%s", diff)
	}
}
