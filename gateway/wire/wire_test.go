package wire

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

func TestErrorEnvelopes(t *testing.T) {
	e := &Error{Status: http.StatusTooManyRequests, Code: "SEMAPHORE_TIMEOUT", Message: `waited "too" long`, RetryAfter: 3, Gate: "model:c1:glm-5"}
	var openai struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal(AppendError(nil, OpenAI, e), &openai); err != nil {
		t.Fatal(err)
	}
	if openai.Error.Message != e.Message || openai.Error.Type != "rate_limit_error" || openai.Error.Code != e.Code {
		t.Errorf("openai = %+v", openai)
	}
	var anthropic struct {
		Type  string
		Error struct{ Type, Message, Code string }
	}
	if err := json.Unmarshal(AppendError(nil, Anthropic, e), &anthropic); err != nil {
		t.Fatal(err)
	}
	if anthropic.Type != "error" || anthropic.Error.Type != "rate_limit_error" || anthropic.Error.Code != e.Code {
		t.Errorf("anthropic = %+v", anthropic)
	}
	var gemini struct {
		Error struct {
			Code    int
			Message string
			Status  string
			Details []map[string]any
		}
	}
	if err := json.Unmarshal(AppendError(nil, Gemini, e), &gemini); err != nil {
		t.Fatal(err)
	}
	g := gemini.Error
	if g.Code != 429 || g.Status != "RESOURCE_EXHAUSTED" || len(g.Details) != 2 {
		t.Fatalf("gemini = %+v", g)
	}
	if g.Details[0]["retryDelay"] != "3s" || g.Details[1]["reason"] != e.Code ||
		!reflect.DeepEqual(g.Details[1]["metadata"], map[string]any{"gate": e.Gate}) {
		t.Errorf("gemini details = %v", g.Details)
	}
	// No Retry-After, no gate: ErrorInfo alone, without metadata.
	if err := json.Unmarshal(AppendError(nil, Gemini, &Error{Status: 404, Code: "MODEL_NOT_FOUND"}), &gemini); err != nil {
		t.Fatal(err)
	}
	if len(gemini.Error.Details) != 1 || gemini.Error.Details[0]["metadata"] != nil || gemini.Error.Status != "NOT_FOUND" {
		t.Errorf("gemini 404 = %+v", gemini.Error)
	}
}

func TestSSEErrorEvent(t *testing.T) {
	e := &Error{Status: 502, Code: "UPSTREAM_STREAM_ERROR", Message: "cut"}
	if got := string(AppendSSEError(nil, Anthropic, e)); !strings.HasPrefix(got, "event: error\ndata: {") || !strings.HasSuffix(got, "}\n\n") {
		t.Errorf("anthropic event = %q", got)
	}
	if got := string(AppendSSEError(nil, OpenAI, e)); !strings.HasPrefix(got, "data: {\"error\":") || !strings.HasSuffix(got, "}\n\n") {
		t.Errorf("openai event = %q", got)
	}
}

func TestWriteErrorHeaders(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Encoding", "gzip") // from an upstream: must not describe our body
	WriteError(rec, OpenAI, &Error{Status: 503, Code: "OVERLOADED", Message: "busy", RetryAfter: 1, Gate: "global"})
	h := rec.Header()
	if rec.Code != 503 || h.Get("Retry-After") != "1" || h.Get(HeaderGate) != "global" || h.Get("Content-Encoding") != "" ||
		h.Get("Content-Length") != strconv.Itoa(rec.Body.Len()) || h.Get("Content-Type") != "application/json" {
		t.Errorf("status %d headers %v", rec.Code, h)
	}
	rec = httptest.NewRecorder()
	WriteError(rec, OpenAI, &Error{Status: 404, Code: "NOT_FOUND", Message: "no"})
	if rec.Header().Get("Retry-After") != "" || rec.Header().Get(HeaderGate) != "" {
		t.Errorf("headers without retry or gate: %v", rec.Header())
	}
}

func TestStatusNames(t *testing.T) {
	for status, want := range map[int][2]string{
		400: {"invalid_request_error", "INVALID_ARGUMENT"},
		401: {"authentication_error", "UNAUTHENTICATED"},
		403: {"permission_error", "PERMISSION_DENIED"},
		408: {"timeout_error", "DEADLINE_EXCEEDED"},
		413: {"request_too_large", "INVALID_ARGUMENT"},
		429: {"rate_limit_error", "RESOURCE_EXHAUSTED"},
		500: {"api_error", "INTERNAL"},
		502: {"api_error", "UNAVAILABLE"},
		503: {"overloaded_error", "UNAVAILABLE"},
		504: {"timeout_error", "DEADLINE_EXCEEDED"},
	} {
		if got := ErrorType(status); got != want[0] {
			t.Errorf("ErrorType(%d) = %s, want %s", status, got, want[0])
		}
		if got := GeminiStatus(status); got != want[1] {
			t.Errorf("GeminiStatus(%d) = %s, want %s", status, got, want[1])
		}
	}
	if OpenAI.String() != "openai" || Anthropic.String() != "anthropic" || Gemini.String() != "gemini" {
		t.Error("dialect names")
	}
}

func TestOpenAIDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                         "0s",
		0:                                    "0s",
		1500 * time.Microsecond:              "2ms",
		999 * time.Millisecond:               "999ms",
		time.Second:                          "1s",
		time.Second + time.Millisecond:       "2s",
		6*time.Minute - 100*time.Millisecond: "6m0s",
		26*time.Hour + 30*time.Second + 1e6:  "26h0m31s",
	} {
		if got := OpenAIDuration(d); got != want {
			t.Errorf("OpenAIDuration(%v) = %s, want %s", d, got, want)
		}
	}
}

func TestRateLimitHeadersTightestTokens(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	b := map[string]live.Budget{
		live.BudgetRPM: {Limit: 60, Remaining: -2, ResetAt: now.Add(20 * time.Second)},
		live.BudgetTPM: {Limit: 1000, Remaining: 400, ResetAt: now.Add(time.Minute)},
		live.BudgetTPD: {Limit: 5000, Remaining: 400, ResetAt: now.Add(14 * time.Hour)},
	}
	h := http.Header{}
	SetRateLimitHeaders(h, b, now)
	want := http.Header{
		"X-Ratelimit-Limit-Requests":     {"60"},
		"X-Ratelimit-Remaining-Requests": {"0"}, // never negative
		"X-Ratelimit-Reset-Requests":     {"20s"},
		"X-Ratelimit-Limit-Tokens":       {"5000"}, // a tie: the day binds longer
		"X-Ratelimit-Remaining-Tokens":   {"400"},
		"X-Ratelimit-Reset-Tokens":       {"14h0m0s"},
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("headers = %v, want %v", h, want)
	}
	delete(b, live.BudgetRPM)
	b[live.BudgetTPM] = live.Budget{Limit: 1000, Remaining: 10, ResetAt: now.Add(time.Minute)}
	h = http.Header{}
	SetRateLimitHeaders(h, b, now)
	if h.Get("X-Ratelimit-Limit-Tokens") != "1000" || h.Get("X-Ratelimit-Limit-Requests") != "" {
		t.Errorf("tpm tighter, no rpm: %v", h)
	}
	h = http.Header{}
	SetRateLimitHeaders(h, nil, now)
	if len(h) != 0 {
		t.Errorf("no budgets, headers %v", h)
	}
}

func TestModelListByAllowlist(t *testing.T) {
	l := NewModelList([]ServedModel{
		{ID: "glm-5", Owner: "zai", Served: Served{"zai", "glm-5"}},
		{ID: "zai/glm-5", Owner: "zai", Served: Served{"zai", "glm-5"}},
		{ID: "glm-5", Owner: "other", Served: Served{"other", "glm-5"}},
		{ID: "alpha", Served: Served{"", "alpha"}},
	})
	ids := func(body []byte) []string {
		var v struct {
			Object string
			Data   []struct{ ID, OwnedBy string }
		}
		if err := json.Unmarshal(body, &v); err != nil || v.Object != "list" {
			t.Fatalf("%s: %v", body, err)
		}
		var out []string
		for _, d := range v.Data {
			out = append(out, d.ID)
		}
		return out
	}
	if got := ids(l.Render(limits.ModelAllowlist{})); !reflect.DeepEqual(got, []string{"alpha", "glm-5", "zai/glm-5"}) {
		t.Errorf("all = %v", got)
	}
	eff := limits.NewModelAllowlist([]string{"other/glm-5"})
	if got := ids(l.Render(eff)); !reflect.DeepEqual(got, []string{"glm-5"}) {
		t.Errorf("other/glm-5 only = %v", got)
	}
	if _, ok := l.Entry("zai/glm-5", eff); ok {
		t.Error("zai/glm-5 listed for a key allowed other/glm-5 only")
	}
	obj, ok := l.Entry("alpha", limits.ModelAllowlist{})
	if !ok || !strings.Contains(string(obj), `"owned_by":"gatehouse"`) {
		t.Errorf("alpha = %s %v", obj, ok)
	}
}

func TestGeminiKeyAndQuery(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1beta/models/m:generateContent?key=%20from-query%20&alt=sse", nil)
	if got := GeminiKey(r); got != "from-query" {
		t.Errorf("query key = %q", got)
	}
	r.Header.Set("X-Goog-Api-Key", " from-header ")
	if got := GeminiKey(r); got != "from-header" {
		t.Errorf("header key = %q, want the header over the query", got)
	}
	for _, tc := range []struct {
		st        Style
		raw, want string
	}{
		{Gemini, "key=secret&alt=sse", "alt=sse"},
		{Gemini, "key=secret", ""},
		{Gemini, "key=%zz&alt=sse", "alt=sse"}, // a bad part elsewhere keeps a good alt
		{Gemini, "alt=a%20b", "alt=a+b"},
		{OpenAI, "alt=sse&key=secret", ""}, // nothing of the client's query goes upstream
	} {
		if got := UpstreamQuery(tc.st, tc.raw); got != tc.want {
			t.Errorf("UpstreamQuery(%v, %q) = %q, want %q", tc.st, tc.raw, got, tc.want)
		}
	}
}
