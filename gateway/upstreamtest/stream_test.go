package upstreamtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// streamResult is what a test asserts about a stream.
type streamResult struct {
	Events []string // event names, or "data" for unnamed events; "[DONE]" for the terminator
	Text   string   // concatenated content deltas
	Usage  string   // usage as "prompt/completion/total" where the stream reports it
}

// summarise turns raw events into a streamResult for the given route.
func summarise(t *testing.T, route string, events []sseEvent) streamResult {
	t.Helper()
	var r streamResult
	for _, ev := range events {
		name := ev.name
		if name == "" {
			name = "data"
		}
		if ev.data == "[DONE]" {
			r.Events = append(r.Events, "[DONE]")
			continue
		}
		r.Events = append(r.Events, name)
		switch route {
		case "chat", "completions":
			c := decode[struct {
				Object  string `json:"object"`
				Model   string `json:"model"`
				Choices []struct {
					Text  string `json:"text"`
					Delta struct {
						Content string `json:"content"`
					} `json:"delta"`
				} `json:"choices"`
				Usage *openAIUsage `json:"usage"`
			}](t, []byte(ev.data))
			if c.Model != "m1" {
				t.Errorf("chunk model = %q, want m1", c.Model)
			}
			for _, ch := range c.Choices {
				r.Text += ch.Text + ch.Delta.Content
			}
			if c.Usage != nil {
				r.Usage = usageString(c.Usage.PromptTokens, c.Usage.CompletionTokens, c.Usage.TotalTokens)
			}
		case "responses":
			e := decode[struct {
				Type     string `json:"type"`
				Delta    string `json:"delta"`
				Response *struct {
					Usage *struct {
						InputTokens  int `json:"input_tokens"`
						OutputTokens int `json:"output_tokens"`
						TotalTokens  int `json:"total_tokens"`
					} `json:"usage"`
				} `json:"response"`
			}](t, []byte(ev.data))
			if e.Type != ev.name {
				t.Errorf("event %q carries type %q", ev.name, e.Type)
			}
			r.Text += e.Delta
			if e.Response != nil && e.Response.Usage != nil {
				u := e.Response.Usage
				r.Usage = usageString(u.InputTokens, u.OutputTokens, u.TotalTokens)
			}
		case "messages":
			e := decode[struct {
				Type    string `json:"type"`
				Message *struct {
					Usage anthropicUsage `json:"usage"`
				} `json:"message"`
				Delta *struct {
					Text string `json:"text"`
				} `json:"delta"`
				Usage *anthropicUsage `json:"usage"`
			}](t, []byte(ev.data))
			if e.Type != ev.name {
				t.Errorf("event %q carries type %q", ev.name, e.Type)
			}
			if e.Delta != nil {
				r.Text += e.Delta.Text
			}
			if e.Message != nil {
				r.Usage = usageString(e.Message.Usage.InputTokens, 0, 0)
			}
			if e.Usage != nil {
				r.Usage += "/" + usageString(e.Usage.OutputTokens, 0, 0)
			}
		}
	}
	return r
}

func usageString(a, b, c int) string {
	s, _ := json.Marshal([]int{a, b, c})
	return strings.Trim(string(s), "[]")
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestStreaming(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Chunks: 3})
	tests := []struct {
		name   string
		route  string
		c      call
		want   streamResult
		wantCT string
	}{
		{
			name:  "chat",
			route: "chat",
			c:     call{path: "/v1/chat/completions", key: "k", body: `{"model":"m1","stream":true}`},
			want:  streamResult{Events: concat(repeat("data", 4), []string{"[DONE]"}), Text: "Hello from the"},
		},
		{
			name:  "chat include_usage",
			route: "chat",
			c:     call{path: "/v1/chat/completions", key: "k", body: `{"model":"m1","stream":true,"stream_options":{"include_usage":true}}`},
			want:  streamResult{Events: concat(repeat("data", 5), []string{"[DONE]"}), Text: "Hello from the", Usage: "20,10,30"},
		},
		{
			name:  "chat chunks and usage per request",
			route: "chat",
			c: call{path: "/v1/chat/completions", key: "k", body: `{"model":"m1","stream":true,"stream_options":{"include_usage":true}}`,
				header: map[string]string{HeaderChunks: "5", HeaderChunkInterval: "1", HeaderUsageTokens: "3"}},
			want: streamResult{Events: concat(repeat("data", 7), []string{"[DONE]"}), Text: "Hello from the fake upstream", Usage: "2,1,3"},
		},
		{
			name:  "completions include_usage",
			route: "completions",
			c:     call{path: "/v1/completions", key: "k", body: `{"model":"m1","stream":true,"stream_options":{"include_usage":true}}`},
			want:  streamResult{Events: concat(repeat("data", 5), []string{"[DONE]"}), Text: "Hello from the", Usage: "20,10,30"},
		},
		{
			name:  "responses",
			route: "responses",
			c:     call{path: "/v1/responses", key: "k", body: `{"model":"m1","stream":true}`},
			want: streamResult{Events: concat(
				[]string{"response.created", "response.output_item.added", "response.content_part.added"},
				repeat("response.output_text.delta", 3),
				[]string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"},
			), Text: "Hello from the", Usage: "20,10,30"},
		},
		{
			name:  "messages",
			route: "messages",
			c:     call{path: "/v1/messages", key: "k", anth: true, body: `{"model":"m1","stream":true}`},
			want: streamResult{Events: concat(
				[]string{"message_start", "content_block_start", "ping"},
				repeat("content_block_delta", 3),
				[]string{"content_block_stop", "message_delta", "message_stop"},
			), Text: "Hello from the", Usage: "20,0,0/10,0,0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := ts.do(t.Context(), t, tt.c)
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d", resp.StatusCode)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type = %q, want text/event-stream", ct)
			}
			events, err := readSSE(resp.Body)
			if err != nil {
				t.Fatalf("read stream: %v", err)
			}
			if diff := cmp.Diff(tt.want, summarise(t, tt.route, events)); diff != "" {
				t.Errorf("stream mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
