package probe

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

func TestRequestPerStyle(t *testing.T) {
	for _, tc := range []struct {
		st       wire.Style
		path     string
		maxField string
	}{
		{wire.OpenAI, "/v1/chat/completions", `"max_tokens":8`},
		{wire.Anthropic, "/v1/messages", `"max_tokens":8`},
		{wire.Gemini, "/v1beta/models/gemini-x:generateContent", `"maxOutputTokens":8`},
	} {
		path, body := Request(tc.st, "gemini-x")
		if path != tc.path || !strings.Contains(string(body), tc.maxField) || !json.Valid(body) {
			t.Errorf("style %v: %s %s", tc.st, path, body)
		}
		if tc.st != wire.Gemini && !strings.Contains(string(body), `"model":"gemini-x"`) {
			t.Errorf("style %v: no model in %s", tc.st, body)
		}
	}
	// A model id is quoted into the body as JSON, never spliced raw.
	if _, body := Request(wire.OpenAI, `a"b`); !json.Valid(body) {
		t.Errorf("a quote in the model broke the body: %s", body)
	}
}

func answer(status int, body string, failed *wire.Error) Result {
	w := &Writer{}
	w.Header().Set("Content-Type", "application/json")
	if status != 0 {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
	return Answer("m", w, failed, 0)
}

func TestAnswer(t *testing.T) {
	for _, tc := range []struct {
		name                string
		status              int
		body                string
		failed              *wire.Error
		text, code, message string
		wantStatus          int
	}{
		{"openai text", 200, `{"choices":[{"message":{"content":"ok"}}]}`, nil, "ok", "", "", 200},
		{"anthropic text", 200, `{"content":[{"type":"text","text":"o"},{"type":"text","text":"k"}]}`, nil, "ok", "", "", 200},
		{"gemini text", 200, `{"candidates":[{"content":{"parts":[{"text":"ok"}]}}]}`, nil, "ok", "", "", 200},
		{"openai error code", 401, `{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`, nil, "", "invalid_api_key", "bad key", 401},
		{"openai numeric code: the type", 429, `{"error":{"message":"slow","type":"rate_limit","code":429}}`, nil, "", "rate_limit", "slow", 429},
		{"gemini status word", 403, `{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED"}}`, nil, "", "PERMISSION_DENIED", "denied", 403},
		{"anthropic type", 529, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`, nil, "", "overloaded_error", "busy", 529},
		{"no JSON", 502, "upstream down\n", nil, "", "502", "upstream down", 502},
		{"JSON without error", 500, `{}`, nil, "", "500", "", 500},
		{"the gateway's own error", 429, `ignored`, &wire.Error{Status: 429, Code: "RATE_LIMIT_RPM", Message: "wait"}, "", "RATE_LIMIT_RPM", "wait", 429},
		{"never answered", 0, "", nil, "", "499", "", 499},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := answer(tc.status, tc.body, tc.failed)
			if got.Status != tc.wantStatus || got.Text != tc.text || got.Code != tc.code || got.Message != tc.message || got.Model != "m" {
				t.Fatalf("got %+v", got)
			}
			if got.OK() != (tc.wantStatus < 300) {
				t.Fatalf("OK() = %v for status %d", got.OK(), got.Status)
			}
		})
	}
}

func TestWriterKeepsTheFirstStatusAndBoundsTheBody(t *testing.T) {
	w := &Writer{}
	_, _ = w.Write([]byte("x"))
	w.WriteHeader(http.StatusInternalServerError)
	if w.status != http.StatusOK {
		t.Fatalf("status %d after a write, then a late WriteHeader", w.status)
	}
	big := make([]byte, bodyLimit)
	if n, err := w.Write(big); n != len(big) || err != nil {
		t.Fatalf("Write = %d, %v: the relay must see every byte taken", n, err)
	}
	if w.body.Len() != bodyLimit {
		t.Fatalf("kept %d bytes, want the first %d", w.body.Len(), bodyLimit)
	}
	w.Flush()
}
