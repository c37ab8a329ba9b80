package gateway

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// openStream starts a streaming chat request and returns the response.
func (e *env) openStream(ctx context.Context, model string, hdr ...string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.gwURL+"/v1/chat/completions", strings.NewReader(chatBody(model, true)))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testClientKey)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("open stream: %v", err)
	}
	return resp
}

func TestStreamHoldsPermitUntilEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Chunks: 6, ChunkInterval: 40 * time.Millisecond})
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)
	gate := "model:c1:glm-5"

	resp := e.openStream(ctx, "glm-5")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatalf("first line: %v", err)
	}
	// Mid-stream: the stream holds the model gate, a second request queues.
	if g := e.gate(gate); g.InFlight != 1 {
		t.Fatalf("in flight mid-stream = %d, want 1", g.InFlight)
	}
	second := make(chan reply, 1)
	go func() { second <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) }()
	waitFor(t, 2*time.Second, "second request queued behind the stream", func() bool { return e.gate(gate).Queued == 1 })

	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("read stream: %v", err)
	}
	if !strings.Contains(string(rest), "[DONE]") {
		t.Errorf("stream did not end with [DONE]: %q", rest)
	}
	if r := <-second; r.status != http.StatusOK {
		t.Errorf("queued request: %d", r.status)
	}
	waitFor(t, time.Second, "permit back after the stream ended", func() bool { return e.gate(gate).InFlight == 0 })
	if got := e.up.Peak("k1", "glm-5"); got != 1 {
		t.Errorf("upstream peak %d, want 1", got)
	}
}

func TestStreamClientDisconnectReleasesPermit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Chunks: 1000, ChunkInterval: 50 * time.Millisecond})
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx, cancel := context.WithCancel(testCtx(t))
	resp := e.openStream(ctx, "glm-5")
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatalf("first line: %v", err)
	}
	if g := e.gate("model:c1:glm-5"); g.InFlight != 1 {
		t.Fatalf("in flight = %d, want 1", g.InFlight)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, time.Second, "permit back after the client left", func() bool { return e.gate("model:c1:glm-5").InFlight == 0 })
	if err := e.up.WaitInFlight(testCtx(t), 0); err != nil {
		t.Errorf("upstream request not cancelled: %v", err)
	}
}

func TestStreamExecutionBoundAfterStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Chunks: 1000, ChunkInterval: 30 * time.Millisecond})
	c := e.conn("c1", "k1", "glm-5")
	// The bound must fire after the stream has started (30 s of chunks), also on a loaded machine.
	c.Overrides = limits.Overrides{ExecutionMaxWaitMs: ptr(2000), ModelConcurrency: map[string]int{"glm-5": 1}}
	e.gw.Apply(Config{Connections: []Connection{c}})
	resp := e.openStream(testCtx(t), "glm-5")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200 (the stream starts before the bound)", resp.StatusCode)
	}
	body, _ := io.ReadAll(resp.Body)
	data := sseData(string(body))
	if len(data) < 2 {
		t.Fatalf("want some chunks then an error event, got %q", body)
	}
	last := reply{body: data[len(data)-1]}
	if code := last.errorCode(t); code != CodeExecutionTimeout {
		t.Errorf("last event code = %q, want %s", code, CodeExecutionTimeout)
	}
	waitFor(t, time.Second, "permit back after the bound", func() bool { return e.gate("model:c1:glm-5").InFlight == 0 })
}

func TestAnthropicStreamErrorEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Chunks: 1000, ChunkInterval: 30 * time.Millisecond})
	c := e.conn("an", "ka", "claude-x")
	c.APIStyle = "anthropic"
	c.Overrides = limits.Overrides{ExecutionMaxWaitMs: ptr(2000)} // fires mid-stream
	e.gw.Apply(Config{Connections: []Connection{c}})
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodPost, e.gwURL+"/v1/messages",
		strings.NewReader(`{"model":"claude-x","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("X-Api-Key", testClientKey)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "event: error\ndata: {\"type\":\"error\"") || !strings.Contains(string(body), CodeExecutionTimeout) {
		t.Errorf("no Anthropic error event at the end: %q", body[max(0, len(body)-300):])
	}
}
