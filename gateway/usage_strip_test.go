package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestUsageInjectionKeepsLastDelta: when the gateway adds include_usage for
// its own count and the provider puts usage on the last chunk together with
// its delta and finish_reason, the client still gets that delta and
// finish_reason, without the usage it did not ask for (issue 24, finding 6:
// the whole chunk was dropped, the client lost its last tokens).
func TestUsageInjectionKeepsLastDelta(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	var asked atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		asked.Store(strings.Contains(string(b), `"include_usage":true`))
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hello"}}]}`+"\n\n"+
			`data: {"id":"c","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`+"\n\n"+
			"data: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	c := Connection{ID: "a", Name: "conn-a", Provider: "zai", APIStyle: "openai", BaseURL: up.URL + "/v1",
		APIKey: "ka", Models: []string{"glm-5"}, Enabled: true, Overrides: limits.Overrides{TPM: ptr[int64](100000)}}
	e.gw.Apply(Config{Connections: []Connection{c}})

	r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", true))
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if !asked.Load() {
		t.Fatal("the gateway did not ask the upstream for usage: the test does not test stripping")
	}
	_, data := sseEvents(r.body)
	want := []string{
		`{"id":"c","choices":[{"index":0,"delta":{"content":"Hello"}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":"stop"}]}`,
		"[DONE]",
	}
	if strings.Join(data, "\n") != strings.Join(want, "\n") {
		t.Errorf("client got events\n%q\nwant\n%q", data, want)
	}
}
