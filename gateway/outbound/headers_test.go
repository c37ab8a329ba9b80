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

// TestCopyResponseHeader: hop-by-hop headers, cookies and the headers the
// upstream's Connection names stay with the upstream; the rest reach the
// client.
func TestCopyResponseHeader(t *testing.T) {
	t.Parallel()
	src := http.Header{
		"Content-Type":      {"text/event-stream"},
		"Set-Cookie":        {"a=1"},
		"Transfer-Encoding": {"chunked"},
		"Keep-Alive":        {"timeout=5"},
		"Connection":        {"x-trace"},
		"X-Trace":           {"t1"},
		"Retry-After":       {"3"},
	}
	dst := http.Header{}
	CopyResponseHeader(dst, src)
	want := http.Header{"Content-Type": {"text/event-stream"}, "Retry-After": {"3"}}
	if diff := cmp.Diff(want, dst); diff != "" {
		t.Errorf("headers relayed to the client mismatch (-want +got):\n%s", diff)
	}
}
