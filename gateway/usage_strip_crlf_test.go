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

// TestUsageStripCRLFStreamKeepsEveryEvent: an upstream that frames its event
// stream with CRLF, each event in its own write, and the usage chunk the
// gateway asked for on the client's behalf: the client gets every content
// event and the closing [DONE], byte for byte, and only the usage chunk is
// gone.
func TestUsageStripCRLFStreamKeepsEveryEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	events := []string{
		`data: {"id":"c","choices":[{"index":0,"delta":{"role":"assistant"}}]}` + "\r\n\r\n",
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hello"}}],"usage":null}` + "\r\n\r\n",
		`data: {"id":"c","choices":[{"index":0,"delta":{"content":" world"}}]}` + "\r\n\r\n",
		`data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\r\n\r\n",
		`data: {"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}` + "\r\n\r\n",
		"data: [DONE]\r\n\r\n",
	}
	var asked atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		asked.Store(strings.Contains(string(b), `"include_usage":true`))
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, ev := range events {
			_, _ = io.WriteString(w, ev)
			_ = rc.Flush()
		}
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
	want := strings.Join(events[:4], "") + events[5]
	if r.body != want {
		t.Errorf("client got\n%q\nwant\n%q", r.body, want)
	}
	if _, data := sseEvents(r.body); len(data) == 0 || data[len(data)-1] != "[DONE]" {
		t.Errorf("client's last event %q, want [DONE]", data)
	}
}
