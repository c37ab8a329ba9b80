package usage

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestUsageTap(t *testing.T) {
	t.Parallel()
	const usageChunk = `data: {"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}` + "\n\n"
	openAIStream := `data: {"id":"c","choices":[{"delta":{"content":"usage: {"}}],"usage":null}` + "\n\n" +
		`data: {"id":"c","choices":[{"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n" +
		usageChunk + "data: [DONE]\n\n"
	tests := []struct {
		name       string
		body       string
		sse, strip bool
		want       int64
		wantOut    string // with strip; "" = the body unchanged
	}{
		{name: "openai total", body: `{"id":"x","choices":[{"message":{"content":"\"usage\":{\"total_tokens\":99}"}}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`, want: 7},
		{name: "openai without total", body: `{"usage":{"prompt_tokens":3,"completion_tokens":4}}`, want: 7},
		{name: "anthropic message", body: `{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":10,"output_tokens":20}}`, want: 30},
		{name: "nested usage ignored in a body", body: `{"data":{"usage":{"total_tokens":5}},"x":1}`, want: 0},
		{name: "null usage", body: `{"usage":null}`, want: 0},
		{name: "escaped key", body: `{"usag\u0065":{"total_tokens":5}}`, want: 0},
		{name: "key with an escape before its last letter", body: `{"usag\/e":{"total_tokens":5}}`, want: 0},
		{name: "no usage", body: `{"error":{"message":"bad"}}`, want: 0},
		{name: "openai stream", body: openAIStream, sse: true, want: 12},
		{name: "openai stream stripped", body: openAIStream, sse: true, strip: true, want: 12,
			wantOut: strings.Replace(openAIStream, usageChunk, "", 1)},
		{name: "openai stream CRLF", body: strings.ReplaceAll(openAIStream, "\n", "\r\n"), sse: true, want: 12},
		{name: "anthropic stream", sse: true, want: 25, body: "event: message_start\n" +
			`data: {"type":"message_start","message":{"id":"m","usage":{"input_tokens":20,"output_tokens":1}}}` + "\n\n" +
			"event: ping\ndata: {\"type\":\"ping\"}\n\n" +
			"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}` + "\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
		{name: "responses stream", sse: true, want: 9, body: "event: response.created\n" +
			`data: {"type":"response.created","response":{"id":"r","usage":null}}` + "\n\n" +
			"event: response.completed\n" +
			`data: {"type":"response.completed","response":{"id":"r","usage":{"input_tokens":4,"output_tokens":5,"total_tokens":9}}}` + "\n\n"},
		// Long strings go through the skipping fast path (IndexByte to the
		// next quote, backslash or line end): escapes inside them, and a
		// "usage" key right after one, must still be seen.
		{name: "long strings with escapes", want: 7, body: `{"choices":[{"message":{"content":"` + strings.Repeat("lorem ipsum ", 40) +
			`\"usage\":{\"total_tokens\":99} \\"}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`},
		{name: "long stream strings stripped", sse: true, strip: true, want: 12,
			body:    `data: {"choices":[{"delta":{"content":"` + strings.Repeat("dolor sit ", 50) + `\n\"x\""}}]}` + "\n\n" + usageChunk,
			wantOut: `data: {"choices":[{"delta":{"content":"` + strings.Repeat("dolor sit ", 50) + `\n\"x\""}}]}` + "\n\n"},
		// Some providers put usage on the last delta: stripping takes only
		// the usage member the gateway asked for, never the content
		// (issue 24, finding 6).
		{name: "stripping keeps a last delta that carries usage", sse: true, strip: true, want: 3,
			body:    `data: {"id":"c","choices":[{"delta":{"content":"end"},"finish_reason":"stop"}],"usage":{"total_tokens":3}}` + "\n\ndata: [DONE]\n\n",
			wantOut: `data: {"id":"c","choices":[{"delta":{"content":"end"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"},
		{name: "stripping usage as the first member", sse: true, strip: true, want: 4,
			body:    "event: chunk\r\n" + `data: {"usage": {"total_tokens":4} , "choices":[{"delta":{"content":"x"}}]}` + "\r\n\r\n",
			wantOut: "event: chunk\r\n" + `data: { "choices":[{"delta":{"content":"x"}}]}` + "\n\n"},
		{name: "stripping keeps an unterminated last event", body: "data: {\"a\":1}\n\ndata: [DONE]", sse: true, strip: true,
			wantOut: "data: {\"a\":1}\n\ndata: [DONE]"},
		// Only a line that starts with "data:" is data: a comment or another
		// field that holds "data:" after its start, or starts as it does, is
		// not read.
		{name: "data: inside another line is not data", sse: true, want: 7, body: `data: {"choices":[],"usage":{"total_tokens":7}}` + "\n" +
			`: data: {"usage":{"total_tokens":99}}` + "\n\n" +
			`id: data:{"usage":{"total_tokens":98}}` + "\n" + `event: xdata:{"usage":{"total_tokens":97}}` + "\n\n" +
			`dat {"usage":{"total_tokens":96}}` + "\n" + `datum: {"usage":{"total_tokens":95}}` + "\n\n"},
	}
	for _, tc := range tests {
		for _, step := range []int{len(tc.body), 1, 7} {
			tap := NewTap(tc.sse, tc.strip)
			var out []byte
			for i := 0; i < len(tc.body); i += step {
				out = append(out, tap.Feed([]byte(tc.body[i:min(i+step, len(tc.body))]))...)
			}
			out = append(out, tap.Flushed()...)
			if got := tap.Tokens(); got != tc.want {
				t.Errorf("%s (reads of %d): tokens = %d, want %d", tc.name, step, got, tc.want)
			}
			wantOut := tc.wantOut
			if wantOut == "" {
				wantOut = tc.body
			}
			if string(out) != wantOut {
				t.Errorf("%s (reads of %d): client gets\n%q\nwant\n%q", tc.name, step, out, wantOut)
			}
		}
	}
}

func TestRewriteBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, model string
		addUsage          bool
		want              string
	}{
		{name: "nothing to do", body: `{"model":"m","stream":true}`, model: "m", want: `{"model":"m","stream":true}`},
		{name: "model only", body: `{"model":"z/m","stream":true}`, model: "m", want: `{"model":"m","stream":true}`},
		{name: "usage inserted", body: `{"model":"m","stream":true}`, model: "m", addUsage: true,
			want: `{"stream_options":{"include_usage":true},"model":"m","stream":true}`},
		{name: "usage and model", body: ` {"stream":true,"model":"z/m"}`, model: "m", addUsage: true,
			want: ` {"stream_options":{"include_usage":true},"stream":true,"model":"m"}`},
		{name: "existing options kept", body: `{"model":"z/m","stream_options":{"include_obfuscation":false,"include_usage":false},"stream":true}`,
			model: "m", addUsage: true,
			want: `{"model":"m","stream_options":{"include_obfuscation":false,"include_usage":true},"stream":true}`},
		{name: "options before model", body: `{"stream_options":null,"model":"z/m"}`, model: "m", addUsage: true,
			want: `{"stream_options":{"include_usage":true},"model":"m"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := Scan([]byte(tc.body))
			if err != nil {
				t.Fatalf("Scan: %v", err)
			}
			got := string(RewriteBody(nil, []byte(tc.body), info, tc.model, tc.addUsage))
			if got != tc.want {
				t.Errorf("RewriteBody = %s, want %s", got, tc.want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("rewritten body is not valid JSON: %s", got)
			}
		})
	}
}

func TestScanBodyIncludeUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want bool
	}{
		{name: "absent", body: `{"model":"m"}`},
		{name: "true", body: `{"model":"m","stream_options":{"include_usage":true}}`, want: true},
		{name: "false", body: `{"model":"m","stream_options":{"include_usage":false}}`},
		{name: "nested ignored", body: `{"model":"m","x":{"stream_options":{"include_usage":true}}}`},
	}
	for _, tc := range tests {
		info, err := Scan([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: Scan: %v", tc.name, err)
		}
		if info.IncludeUsage != tc.want {
			t.Errorf("%s: includeUsage = %v, want %v", tc.name, info.IncludeUsage, tc.want)
		}
	}
}

// TestDecodeUsage: the usage decoder reads what json.Unmarshal into *int64
// fields read, and rejects what it rejected, for the shapes upstreams send
// and the malformed ones around them.
func TestDecodeUsage(t *testing.T) {
	t.Parallel()
	type ref struct {
		TotalTokens      *int64 `json:"total_tokens"`
		PromptTokens     *int64 `json:"prompt_tokens"`
		CompletionTokens *int64 `json:"completion_tokens"`
		InputTokens      *int64 `json:"input_tokens"`
		OutputTokens     *int64 `json:"output_tokens"`
	}
	for _, in := range []string{
		`{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}`,
		`{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"accepted_prediction_tokens":0}}`,
		`{"input_tokens":10,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":20,"service_tier":"standard"}`,
		`{"output_tokens":5}`,
		`{ "total_tokens" : 3 , "total_tokens" : null }`,
		`{"total_tokens":null}`,
		`{}`,
		`{"total_tokens":-4}`,
		`{"total_tokens":0}`,
		`{"tot\u0061l_tokens":8}`,
		`{"total_tokens":"12"}`,
		`{"total_tokens":12.0}`,
		`{"total_tokens":1e3}`,
		`{"total_tokens":01}`,
		`{"total_tokens":99999999999999999999}`,
		`{"total_tokens":true}`,
		`{"total_tokens":[1]}`,
		`{"total_tokens":12,}`,
		`{"total_tokens" 12}`,
		`{"other":[1,{"a":"b"}],"total_tokens":6}`,
	} {
		var r ref
		refOK := json.Unmarshal([]byte(in), &r) == nil
		f, ok := decodeUsage([]byte(in))
		if ok != refOK {
			t.Errorf("%s: ok = %v, json.Unmarshal ok = %v", in, ok, refOK)
			continue
		}
		if !ok {
			continue
		}
		for i, p := range []*int64{r.TotalTokens, r.PromptTokens, r.CompletionTokens, r.InputTokens, r.OutputTokens} {
			if f.has[i] != (p != nil) || (p != nil && f.v[i] != *p) {
				t.Errorf("%s: %s = %v/%d, json.Unmarshal %v", in, usageNames[i], f.has[i], f.v[i], p)
			}
		}
	}
}

// TestUsageObjectBound: a usage object of up to maxUsageObject bytes is read;
// a larger one is ignored rather than buffered without end.
func TestUsageObjectBound(t *testing.T) {
	t.Parallel()
	obj := func(size int) string {
		const head, tail = `{"total_tokens":5,"pad":"`, `"}`
		return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
	}
	for _, tc := range []struct {
		size int
		want int64
	}{{maxUsageObject, 5}, {maxUsageObject + 1, 0}} {
		body := `{"usage":` + obj(tc.size) + `}`
		tap := NewTap(false, false)
		tap.Feed([]byte(body))
		if got := tap.Tokens(); got != tc.want {
			t.Errorf("usage object of %d bytes: tokens = %d, want %d", tc.size, got, tc.want)
		}
		tap.Release()
	}
}
