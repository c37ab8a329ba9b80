//go:build !mutate

// Left out of mutation runs (scripts/mutate builds usage with the tag
// mutate): a benchmark kills no mutant, and its fake upstream and net/http
// would be linked into every mutant's test binary, a third of its build.

package usage

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// BenchmarkUsageTap measures the usage scan every successful answer goes
// through (NewTap, feed in 16 KiB reads, the gateway's copy buffer, tokens), on the fake
// upstream's own answers with 20 content pieces, as in the end-to-end
// benchmark: one JSON chat completion and one 20-event stream. Run with:
//
//	go test -run '^$' -bench UsageTap -benchmem ./gateway/usage/
func BenchmarkUsageTap(b *testing.B) {
	up := upstreamtest.NewServer(upstreamtest.Options{})
	srv := httptest.NewServer(up)
	defer srv.Close()
	defer up.Close()
	fetch := func(stream bool) []byte {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"glm-5","messages":[{"role":"user","content":"hi"}],"stream":`+strconv.FormatBool(stream)+`}`))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer k1")
		req.Header.Set(upstreamtest.HeaderChunks, "20")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d, %v", resp.StatusCode, err)
		}
		return body
	}
	for _, tc := range []struct {
		name string
		sse  bool
	}{{"json", false}, {"sse", true}} {
		body := fetch(tc.sse)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				tap := NewTap(tc.sse, false)
				for p := body; len(p) > 0; {
					n := min(len(p), 16<<10)
					tap.Feed(p[:n])
					p = p[n:]
				}
				_ = tap.Tokens() // the fake's stream reports none unless asked

			}
		})
	}
}
