package outbound

import (
	"net/http"
	"testing"
)

// BenchmarkCopyRequestHeader copies the headers of a typical SDK request
// (the OpenAI Python SDK's set plus a trace context) into the upstream
// request's header map, as attempt does.
func BenchmarkCopyRequestHeader(b *testing.B) {
	src := http.Header{
		"Authorization":               {"Bearer gh-client-key"},
		"Content-Type":                {"application/json"},
		"Accept":                      {"application/json"},
		"Accept-Encoding":             {"gzip, deflate"},
		"User-Agent":                  {"OpenAI/Python 1.54.0"},
		"Connection":                  {"keep-alive"},
		"Content-Length":              {"120"},
		"X-Stainless-Lang":            {"python"},
		"X-Stainless-Package-Version": {"1.54.0"},
		"X-Stainless-Os":              {"Linux"},
		"X-Stainless-Arch":            {"x64"},
		"X-Stainless-Runtime":         {"CPython"},
		"X-Stainless-Runtime-Version": {"3.12.3"},
		"X-Stainless-Retry-Count":     {"0"},
		"Traceparent":                 {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	b.ReportAllocs()
	for b.Loop() {
		dst := make(http.Header, len(src)+1)
		CopyRequestHeader(dst, src)
	}
}
