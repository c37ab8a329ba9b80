package upstreamtest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const sentence = "Hello from the fake upstream of Gatehouse. "

type openAIUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func TestChatCompletion(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	type choice struct {
		Index        int     `json:"index"`
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	}
	type chat struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []choice     `json:"choices"`
		Usage   *openAIUsage `json:"usage"`
	}
	tests := []struct {
		name   string
		header map[string]string
		want   chat
	}{
		{
			name: "defaults",
			want: chat{Object: "chat.completion", Model: "glm-5", Choices: []choice{{Message: message{Role: "assistant", Content: sentence}, FinishReason: "stop"}},
				Usage: &openAIUsage{PromptTokens: 20, CompletionTokens: 10, TotalTokens: 30}},
		},
		{
			name:   "usage and chunks from headers",
			header: map[string]string{HeaderUsageTokens: "300", HeaderChunks: "2"},
			want: chat{Object: "chat.completion", Model: "glm-5", Choices: []choice{{Message: message{Role: "assistant", Content: "Hello from"}, FinishReason: "stop"}},
				Usage: &openAIUsage{PromptTokens: 200, CompletionTokens: 100, TotalTokens: 300}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, body := ts.roundTrip(t, call{path: "/v1/chat/completions", key: "k", body: chatBody("glm-5", false), header: tt.header})
			if status != http.StatusOK {
				t.Fatalf("status = %d; body %s", status, body)
			}
			if ct := h.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			got := decode[chat](t, body)
			if !strings.HasPrefix(got.ID, "chatcmpl-") || got.Created == 0 {
				t.Errorf("id %q / created %d: want a chatcmpl- id and a timestamp", got.ID, got.Created)
			}
			got.ID, got.Created = "", 0
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("chat completion mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	type choice struct {
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
	}
	type completion struct {
		Object  string       `json:"object"`
		Model   string       `json:"model"`
		Choices []choice     `json:"choices"`
		Usage   *openAIUsage `json:"usage"`
	}
	status, _, body := ts.roundTrip(t, call{path: "/v1/completions", key: "k", body: `{"model":"davinci","prompt":"hi"}`})
	if status != http.StatusOK {
		t.Fatalf("status = %d; body %s", status, body)
	}
	want := completion{Object: "text_completion", Model: "davinci", Choices: []choice{{Text: sentence, FinishReason: "stop"}},
		Usage: &openAIUsage{PromptTokens: 20, CompletionTokens: 10, TotalTokens: 30}}
	if diff := cmp.Diff(want, decode[completion](t, body)); diff != "" {
		t.Errorf("completion mismatch (-want +got):\n%s", diff)
	}
}

func TestEmbeddings(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	type usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	}
	type item struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	}
	type list struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
		Usage  usage  `json:"usage"`
	}
	tests := []struct {
		name     string
		body     string
		wantN    int
		wantDims int
		base64   bool
	}{
		{name: "one string", body: `{"model":"emb","input":"hi"}`, wantN: 1, wantDims: 16},
		{name: "list of strings", body: `{"model":"emb","input":["a","b","c"],"dimensions":4}`, wantN: 3, wantDims: 4},
		{name: "token ids", body: `{"model":"emb","input":[1,2,3]}`, wantN: 1, wantDims: 16},
		{name: "base64", body: `{"model":"emb","input":["a","b"],"encoding_format":"base64","dimensions":8}`, wantN: 2, wantDims: 8, base64: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := ts.roundTrip(t, call{path: "/v1/embeddings", key: "k", body: tt.body})
			if status != http.StatusOK {
				t.Fatalf("status = %d; body %s", status, body)
			}
			got := decode[list](t, body)
			if got.Object != "list" || got.Model != "emb" || got.Usage != (usage{30, 30}) {
				t.Errorf("object %q model %q usage %+v: want list, emb, 30/30", got.Object, got.Model, got.Usage)
			}
			if len(got.Data) != tt.wantN {
				t.Fatalf("got %d embeddings, want %d", len(got.Data), tt.wantN)
			}
			for i, d := range got.Data {
				if d.Index != i || d.Object != "embedding" {
					t.Errorf("item %d: index %d object %q", i, d.Index, d.Object)
				}
				dims := 0
				if tt.base64 {
					var s string
					if err := json.Unmarshal(d.Embedding, &s); err != nil {
						t.Fatalf("base64 embedding is not a string: %v", err)
					}
					raw, err := base64.StdEncoding.DecodeString(s)
					if err != nil {
						t.Fatalf("decode base64: %v", err)
					}
					dims = len(raw) / 4
				} else {
					var v []float32
					if err := json.Unmarshal(d.Embedding, &v); err != nil {
						t.Fatalf("float embedding: %v", err)
					}
					dims = len(v)
				}
				if dims != tt.wantDims {
					t.Errorf("item %d has %d dimensions, want %d", i, dims, tt.wantDims)
				}
			}
		})
	}
}

func TestResponses(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	type content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type output struct {
		Type    string    `json:"type"`
		Role    string    `json:"role"`
		Content []content `json:"content"`
	}
	type usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	}
	type response struct {
		Object string   `json:"object"`
		Status string   `json:"status"`
		Model  string   `json:"model"`
		Output []output `json:"output"`
		Usage  usage    `json:"usage"`
	}
	status, _, body := ts.roundTrip(t, call{path: "/v1/responses", key: "k", body: `{"model":"gpt-x","input":"hi"}`})
	if status != http.StatusOK {
		t.Fatalf("status = %d; body %s", status, body)
	}
	want := response{Object: "response", Status: "completed", Model: "gpt-x",
		Output: []output{{Type: "message", Role: "assistant", Content: []content{{Type: "output_text", Text: sentence}}}},
		Usage:  usage{InputTokens: 20, OutputTokens: 10, TotalTokens: 30}}
	if diff := cmp.Diff(want, decode[response](t, body)); diff != "" {
		t.Errorf("response mismatch (-want +got):\n%s", diff)
	}
}

type anthropicMessage struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Role       string `json:"role"`
	Model      string `json:"model"`
	Content    []anthropicBlock
	StopReason *string        `json:"stop_reason"`
	Usage      anthropicUsage `json:"usage"`
}

type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

func TestMessages(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{UsageTokens: 9})
	status, _, body := ts.roundTrip(t, call{path: "/v1/messages", key: "ak", anth: true, body: `{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`})
	if status != http.StatusOK {
		t.Fatalf("status = %d; body %s", status, body)
	}
	got := decode[anthropicMessage](t, body)
	if !strings.HasPrefix(got.ID, "msg_") {
		t.Errorf("id %q: want a msg_ prefix", got.ID)
	}
	got.ID = ""
	stop := "end_turn"
	want := anthropicMessage{Type: "message", Role: "assistant", Model: "claude-x", Content: []anthropicBlock{{Type: "text", Text: sentence}},
		StopReason: &stop, Usage: anthropicUsage{InputTokens: 6, OutputTokens: 3}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("message mismatch (-want +got):\n%s", diff)
	}
	if !ts.SawKey("ak") {
		t.Errorf("x-api-key was not recorded")
	}
}

func TestModels(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Models: []string{"a", "b"}})
	t.Run("openai", func(t *testing.T) {
		status, _, body := ts.roundTrip(t, call{method: http.MethodGet, path: "/v1/models", key: "k"})
		if status != http.StatusOK {
			t.Fatalf("status = %d; body %s", status, body)
		}
		type model struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		}
		got := decode[struct {
			Object string  `json:"object"`
			Data   []model `json:"data"`
		}](t, body)
		if got.Object != "list" {
			t.Errorf("object = %q, want list", got.Object)
		}
		if diff := cmp.Diff([]model{{"a", "model"}, {"b", "model"}}, got.Data); diff != "" {
			t.Errorf("models mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		status, _, body := ts.roundTrip(t, call{method: http.MethodGet, path: "/v1/models", key: "k", anth: true})
		if status != http.StatusOK {
			t.Fatalf("status = %d; body %s", status, body)
		}
		type model struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		}
		got := decode[struct {
			Data    []model `json:"data"`
			HasMore bool    `json:"has_more"`
			FirstID string  `json:"first_id"`
		}](t, body)
		if diff := cmp.Diff([]model{{"model", "a"}, {"model", "b"}}, got.Data); diff != "" {
			t.Errorf("models mismatch (-want +got):\n%s", diff)
		}
		if got.HasMore || got.FirstID != "a" {
			t.Errorf("has_more %v first_id %q", got.HasMore, got.FirstID)
		}
	})
}
