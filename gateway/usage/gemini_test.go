package usage

import (
	"strings"
	"testing"
)

// TestGeminiTap: usageMetadata read from Gemini answers — a body, an SSE
// stream (CRLF events, counts repeated per chunk, the last one final) and
// the JSON array of a stream without alt=sse — in reads of every size.
func TestGeminiTap(t *testing.T) {
	t.Parallel()
	chunk := func(text, usage string) string {
		s := `{"candidates":[{"content":{"parts":[{"text":"` + text + `"}],"role":"model"},"index":0}]`
		if usage != "" {
			s += `,"usageMetadata":` + usage
		}
		return s + `,"modelVersion":"g"}`
	}
	final := `{"promptTokenCount":20,"candidatesTokenCount":7,"totalTokenCount":34,"cachedContentTokenCount":5,` +
		`"promptTokensDetails":[{"modality":"TEXT","tokenCount":20}],"thoughtsTokenCount":3}`
	early := `{"promptTokenCount":20,"candidatesTokenCount":1,"totalTokenCount":21}`
	sse := "data: " + chunk("Hello", early) + "\r\n\r\n" + "data: " + chunk(" usageMetadata", "") + "\r\n\r\n" + "data: " + chunk(".", final) + "\r\n\r\n"
	array := "[" + chunk("Hello", early) + ",\r\n" + chunk(".", final) + "]"
	tests := []struct {
		name                   string
		body                   string
		sse                    bool
		tokens, in, out, cache int64
	}{
		{name: "body", body: chunk(strings.Repeat("lorem ", 50), final), tokens: 34, in: 20, out: 10, cache: 5},
		{name: "sse stream", body: sse, sse: true, tokens: 34, in: 20, out: 10, cache: 5},
		{name: "array stream", body: array, tokens: 34, in: 20, out: 10, cache: 5},
		{name: "no total", body: chunk("x", `{"promptTokenCount":4,"candidatesTokenCount":2,"thoughtsTokenCount":1}`), tokens: 7, in: 4, out: 3},
		{name: "OpenAI usage is not Gemini's", body: `{"usage":{"total_tokens":9}}`},
		{name: "nested deeper is ignored", body: `{"a":{"b":{"usageMetadata":{"totalTokenCount":9}}}}`},
	}
	for _, tc := range tests {
		for _, step := range []int{len(tc.body), 1, 7} {
			tap := NewGeminiTap(tc.sse)
			var out []byte
			for i := 0; i < len(tc.body); i += step {
				out = append(out, tap.Feed([]byte(tc.body[i:min(i+step, len(tc.body))]))...)
			}
			c := tap.Counts()
			if got := [4]int64{tap.Tokens(), c.Input, c.Output, c.CacheRead}; got != [4]int64{tc.tokens, tc.in, tc.out, tc.cache} {
				t.Errorf("%s (reads of %d): tokens, in, out, cached = %v, want %v", tc.name, step, got, [4]int64{tc.tokens, tc.in, tc.out, tc.cache})
			}
			if string(out) != tc.body {
				t.Errorf("%s (reads of %d): the body was changed", tc.name, step)
			}
			tap.Release()
		}
	}
	// An OpenAI tap does not take Gemini's key for its own.
	tap := NewTap(false, false)
	tap.Feed([]byte(chunk("x", final)))
	if got := tap.Tokens(); got != 0 {
		t.Errorf("OpenAI tap on a Gemini body: %d tokens, want 0", got)
	}
}

// TestGeminiMaxOutput: a Gemini body's output bound in either spelling;
// anything that is not a positive integer is no bound.
func TestGeminiMaxOutput(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]int64{
		`{"contents":[],"generationConfig":{"maxOutputTokens":150}}`:                           150,
		`{"generation_config":{"max_output_tokens":70},"contents":[{"parts":[{"text":"x"}]}]}`: 70,
		`{"generationConfig":{"maxOutputTokens":"150"}}`:                                       0,
		`{"generationConfig":{"maxOutputTokens":-3}}`:                                          0,
		`{"generationConfig":{"temperature":1}}`:                                               0,
		`{"contents":[]}`:                                                                      0,
		`not json`:                                                                             0,
	} {
		if got := GeminiMaxOutput([]byte(body)); got != want {
			t.Errorf("GeminiMaxOutput(%s) = %d, want %d", body, got, want)
		}
	}
}
