package route

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		path string
		want Route
		ok   bool
	}{
		{"/v1/chat/completions", Chat, true},
		{"/v1/completions", Completions, true},
		{"/v1/embeddings", Embeddings, true},
		{"/v1/responses", Responses, true},
		{"/v1/messages", Messages, true},
		{"/v1/messages/count_tokens", CountTokens, true},
		{"/v1/models", Models, true},
		{"/v1/models/zai/glm-5", Model, true},
		{"/v1/models/", 0, false},
		{"/v1/gatehouse/limits", Limits, true},
		{"/v1beta/models", GeminiModels, true},
		{"/v1beta/models/gemini-2.5-flash", GeminiModel, true},
		{"/v1beta/models/", 0, false},
		{"/v1beta/models/gemini-2.5-flash:generateContent", Generate, true},
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent", StreamGenerate, true},
		{"/v1beta/models/gemini-2.5-flash:countTokens", GeminiCount, true},
		{"/v1beta/models/gemini-2.5-flash:embedContent", 0, false},
		{"/v1/models/gemini-2.5-flash:generateContent", Generate, true},
		{"/v1/models/gemini-2.5-flash:embedContent", Model, true}, // an OpenAI id may hold a colon
		{"/v1/nothing", 0, false},
		{"/v1/chat/completions/", 0, false},
	} {
		got, ok := Of(tc.path)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Of(%q) = %v, %v; want %v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRouteProperties(t *testing.T) {
	for rt := Chat; rt <= Unknown; rt++ {
		wantStyle := wire.OpenAI
		switch rt {
		case Messages, CountTokens:
			wantStyle = wire.Anthropic
		case Generate, StreamGenerate, GeminiCount, GeminiModels, GeminiModel:
			wantStyle = wire.Gemini
		}
		if rt.Style() != wantStyle {
			t.Errorf("route %d speaks %v, want %v", rt, rt.Style(), wantStyle)
		}
		if rt.Free() != (rt == CountTokens || rt == GeminiCount) {
			t.Errorf("route %d free = %v", rt, rt.Free())
		}
		if rt.Listing() && rt < Num {
			t.Errorf("route %d is forwarded and a listing", rt)
		}
		if rt < Num && Suffix[rt] == "" {
			t.Errorf("forwarded route %d has no upstream suffix", rt)
		}
	}
	for rt, want := range map[Route]string{Chat: "chat", Responses: "chat", Messages: "chat", Completions: "text_completion",
		Embeddings: "embeddings", CountTokens: "count_tokens", GeminiCount: "count_tokens", Generate: "generate_content", StreamGenerate: "generate_content"} {
		if got := rt.Operation(); got != want {
			t.Errorf("route %d operation %q, want %q", rt, got, want)
		}
	}
}

func TestPathModel(t *testing.T) {
	for path, want := range map[string]string{
		"/v1beta/models/gemini-2.5-flash:generateContent":        "gemini-2.5-flash",
		"/v1beta/models/models/gemini-2.5-flash:countTokens":     "gemini-2.5-flash",
		"/v1beta/models/gemini-2.5-flash":                        "gemini-2.5-flash",
		"/v1/models/gemini-2.5-flash:streamGenerateContent":      "gemini-2.5-flash",
		"/v1beta/models/tuned:v2:generateContent":                "tuned:v2",
		"/v1beta/models/google/gemini-2.5-flash:generateContent": "google/gemini-2.5-flash",
	} {
		if got := PathModel(path); got != want {
			t.Errorf("PathModel(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestLogName(t *testing.T) {
	for rt := Chat; rt <= Unknown; rt++ {
		if rt == Num {
			continue
		}
		if rt.LogName() == "" {
			t.Errorf("route %d has no request-log name", rt)
		}
	}
	for rt, want := range map[Route]string{Chat: "chat", StreamGenerate: "gemini", GeminiModel: "models", Model: "models", Unknown: "unknown"} {
		if got := rt.LogName(); got != want {
			t.Errorf("route %d is %q in the log, want %q", rt, got, want)
		}
	}
}
