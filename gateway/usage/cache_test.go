package usage

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The usage objects of a Claude Code-like Anthropic turn: 4 uncached input
// tokens, 20 000 read from the cache, 1 000 written to it, 100 out.
const (
	anthStartUsage = `{"input_tokens":4,"cache_creation_input_tokens":1000,"cache_read_input_tokens":20000,` +
		`"cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}`
	anthDeltaUsage = `{"output_tokens":100}`
	// The API's newer message_delta repeats the input counts, cumulative.
	anthDeltaFull = `{"input_tokens":4,"cache_creation_input_tokens":1000,"cache_read_input_tokens":20000,"output_tokens":100}`
)

func anthStream(start, delta string) string {
	s := "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":` + start + `}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}` + "\n\n"
	if delta != "" {
		s += "event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":` + delta + `}` + "\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	}
	return s
}

func openAIChunk(usage string) string {
	return `data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":` + usage + `}` + "\n\n"
}

// TestCacheCounts: every cache field in every place it can arrive — a JSON
// answer, Anthropic's message_start and message_delta, OpenAI's final
// stream chunk and the Responses API's response.completed — normalised to
// input (every prompt token processed), cache reads, cache writes, output
// and the rate count of the style's own limits; in reads of every size.
func TestCacheCounts(t *testing.T) {
	t.Parallel()
	anth := Counts{Input: 21004, CacheRead: 20000, CacheWrite: 1000, Output: 100, RateTokens: 1104, Found: true}
	openAI := Counts{Input: 21000, CacheRead: 20000, Output: 100, RateTokens: 21100, Found: true}
	chatUsage := `{"prompt_tokens":21000,"completion_tokens":100,"total_tokens":21100,` +
		`"prompt_tokens_details":{"cached_tokens":20000,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`
	respUsage := `{"input_tokens":21000,"input_tokens_details":{"cached_tokens":20000},"output_tokens":100,` +
		`"output_tokens_details":{"reasoning_tokens":0},"total_tokens":21100}`
	tests := []struct {
		name string
		body string
		sse  bool
		want Counts
	}{
		{name: "anthropic JSON answer", want: anth,
			body: `{"id":"m","type":"message","content":[{"type":"text","text":"hi"}],"usage":` +
				strings.Replace(anthStartUsage, `"output_tokens":1,`, `"output_tokens":100,`, 1) + `}`},
		{name: "anthropic stream: cache counts in message_start, output in message_delta", sse: true, want: anth,
			body: anthStream(anthStartUsage, anthDeltaUsage)},
		{name: "anthropic stream: message_delta repeats the counts", sse: true, want: anth,
			body: anthStream(anthStartUsage, anthDeltaFull)},
		{name: "anthropic stream: cache counts only in message_delta", sse: true, want: anth,
			body: anthStream(`{"input_tokens":4,"output_tokens":1}`, anthDeltaFull)},
		{name: "anthropic stream cut before message_delta", sse: true,
			want: Counts{Input: 21004, CacheRead: 20000, CacheWrite: 1000, Output: 1, RateTokens: 1005, Found: true},
			body: anthStream(anthStartUsage, "")},
		{name: "anthropic without caching", want: Counts{Input: 10, Output: 20, RateTokens: 30, Found: true},
			body: `{"usage":{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":20}}`},
		{name: "anthropic cache write only (first turn)", want: Counts{Input: 3004, CacheWrite: 3000, Output: 50, RateTokens: 3054, Found: true},
			body: `{"usage":{"input_tokens":4,"cache_creation_input_tokens":3000,"cache_read_input_tokens":0,"output_tokens":50}}`},
		{name: "openai chat JSON answer", want: openAI,
			body: `{"id":"c","object":"chat.completion","choices":[{"message":{"content":"hi"}}],"usage":` + chatUsage + `}`},
		{name: "openai completions JSON answer", want: openAI,
			body: `{"id":"c","object":"text_completion","choices":[{"text":"hi"}],"usage":` + chatUsage + `}`},
		{name: "openai final stream chunk", sse: true, want: openAI,
			body: `data: {"id":"c","choices":[{"delta":{"content":"hi"}}],"usage":null}` + "\n\n" + openAIChunk(chatUsage) + "data: [DONE]\n\n"},
		{name: "openai stream cut before the final chunk", sse: true, want: Counts{},
			body: `data: {"id":"c","choices":[{"delta":{"content":"prompt_tokens_details"}}],"usage":null}` + "\n\n"},
		{name: "responses JSON answer", want: openAI,
			body: `{"id":"r","object":"response","output":[],"usage":` + respUsage + `}`},
		{name: "responses response.completed", sse: true, want: openAI,
			body: "event: response.created\n" + `data: {"type":"response.created","response":{"id":"r","usage":null}}` + "\n\n" +
				"event: response.completed\n" + `data: {"type":"response.completed","response":{"id":"r","usage":` + respUsage + `}}` + "\n\n"},
		{name: "responses stream cut before response.completed", sse: true, want: Counts{},
			body: "event: response.created\n" + `data: {"type":"response.created","response":{"id":"r","usage":null}}` + "\n\n" +
				"event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","delta":"input_tokens_details"}` + "\n\n"},
		{name: "openai cached_tokens null or absent", want: Counts{Input: 50, Output: 5, RateTokens: 55, Found: true},
			body: `{"usage":{"prompt_tokens":50,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":null,"audio_tokens":3}}}`},
		{name: "openai details not an object", want: Counts{Input: 50, Output: 5, RateTokens: 55, Found: true},
			body: `{"usage":{"prompt_tokens":50,"completion_tokens":5,"prompt_tokens_details":[{"cached_tokens":9}]}}`},
		{name: "openai cached_tokens not an integer", want: Counts{Input: 50, Output: 5, RateTokens: 55, Found: true},
			body: `{"usage":{"prompt_tokens":50,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":"9"}}}`},
		{name: "openai cached beyond the prompt is cut to it", want: Counts{Input: 50, CacheRead: 50, Output: 5, RateTokens: 55, Found: true},
			body: `{"usage":{"prompt_tokens":50,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":80}}}`},
		{name: "cached_tokens outside the details is not a cache count", want: Counts{Input: 50, Output: 5, RateTokens: 55, Found: true},
			body: `{"usage":{"prompt_tokens":50,"completion_tokens":5,"cached_tokens":40,"x":{"cached_tokens":40}}}`},
		{name: "negative counts read as 0", want: Counts{Input: 4, Output: 1, RateTokens: 5, Found: true},
			body: `{"usage":{"input_tokens":4,"cache_read_input_tokens":-7,"cache_creation_input_tokens":-1,"output_tokens":1}}`},
		{name: "counts saturate", want: Counts{Input: 1<<63 - 1, CacheRead: 1<<63 - 1, CacheWrite: 1 << 62, Output: 2, RateTokens: 1<<62 + 6, Found: true},
			body: `{"usage":{"input_tokens":4,"cache_read_input_tokens":9223372036854775807,"cache_creation_input_tokens":4611686018427387904,"output_tokens":2}}`},
	}
	for _, tc := range tests {
		for _, step := range []int{len(tc.body), 1, 5} {
			tap := NewTap(tc.sse, false)
			for i := 0; i < len(tc.body); i += step {
				tap.Feed([]byte(tc.body[i:min(i+step, len(tc.body))]))
			}
			if diff := cmp.Diff(tc.want, tap.Counts()); diff != "" {
				t.Errorf("%s (reads of %d): counts mismatch (-want +got):\n%s", tc.name, step, diff)
			}
			if got := tap.Tokens(); got != tc.want.RateTokens {
				t.Errorf("%s (reads of %d): Tokens = %d, want %d", tc.name, step, got, tc.want.RateTokens)
			}
			tap.Release()
		}
	}
}

// TestCacheCountsStripped: the final OpenAI chunk the gateway asked for is
// still read (cache count included) when it is stripped from the client's
// stream.
func TestCacheCountsStripped(t *testing.T) {
	t.Parallel()
	content := `data: {"id":"c","choices":[{"delta":{"content":"hi"}}],"usage":null}` + "\n\n"
	body := content + openAIChunk(`{"prompt_tokens":900,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":800}}`)
	tap := NewTap(true, true)
	out := append(tap.Feed([]byte(body)), tap.Flushed()...)
	if string(out) != content {
		t.Errorf("client gets %q, want %q", out, content)
	}
	if diff := cmp.Diff(Counts{Input: 900, CacheRead: 800, Output: 9, RateTokens: 909, Found: true}, tap.Counts()); diff != "" {
		t.Errorf("counts mismatch (-want +got):\n%s", diff)
	}
	tap.Release()
}
