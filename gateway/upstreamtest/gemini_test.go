package upstreamtest

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// geminiResponse is the part of a GenerateContentResponse the tests read.
type geminiResponse struct {
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
			Role string `json:"role"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *geminiUsageMetadata `json:"usageMetadata"`
	ModelVersion  string               `json:"modelVersion"`
}

type geminiUsageMetadata struct {
	PromptTokenCount     int `json:"promptTokenCount"`
	CandidatesTokenCount int `json:"candidatesTokenCount"`
	ThoughtsTokenCount   int `json:"thoughtsTokenCount"`
	TotalTokenCount      int `json:"totalTokenCount"`
}

// text is the concatenated text of the first candidate.
func (g geminiResponse) text() string {
	var b strings.Builder
	for _, c := range g.Candidates[:min(1, len(g.Candidates))] {
		for _, p := range c.Content.Parts {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

const geminiBody = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`

// geminiCall is a Gemini request with the key as x-goog-api-key.
func geminiCall(path, key string) call {
	return call{path: path, body: geminiBody, header: map[string]string{"x-goog-api-key": key}}
}

func TestGeminiGenerateContent(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	for _, c := range []call{
		geminiCall("/v1beta/models/gemini-2.5-flash:generateContent", "gk"),
		{path: "/v1beta/models/gemini-2.5-flash:generateContent?key=gk", body: geminiBody},
	} {
		status, h, body := ts.roundTrip(t, c)
		if status != http.StatusOK || h.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: status %d, Content-Type %q; body %s", c.path, status, h.Get("Content-Type"), body)
		}
		got := decode[geminiResponse](t, body)
		if got.text() != sentence || got.Candidates[0].FinishReason != "STOP" || got.Candidates[0].Content.Role != "model" {
			t.Errorf("%s: answer %s", c.path, body)
		}
		want := &geminiUsageMetadata{PromptTokenCount: 20, CandidatesTokenCount: 7, ThoughtsTokenCount: 3, TotalTokenCount: 30}
		if diff := cmp.Diff(want, got.UsageMetadata); diff != "" {
			t.Errorf("%s: usageMetadata mismatch (-want +got):\n%s", c.path, diff)
		}
		if got.ModelVersion != "gemini-2.5-flash" {
			t.Errorf("%s: modelVersion %q, want the path's model", c.path, got.ModelVersion)
		}
	}
	if got := ts.Requests("gk", "gemini-2.5-flash"); got != 2 {
		t.Errorf("requests of (gk, gemini-2.5-flash) = %d, want 2 (key from the header and from ?key=)", got)
	}
}

func TestGeminiStream(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Chunks: 3})

	resp, err := ts.do(t.Context(), t, geminiCall("/v1beta/models/g1:streamGenerateContent?alt=sse", "gk"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q, err %v", resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	if strings.Count(string(raw), "\r\n\r\n") != 3 {
		t.Errorf("want 3 events ending in CRLF CRLF: %q", raw)
	}
	events, err := readSSE(strings.NewReader(strings.ReplaceAll(string(raw), "\r\n", "\n")))
	if err != nil || len(events) != 3 {
		t.Fatalf("events %d (%v), want 3", len(events), err)
	}
	var text string
	for i, ev := range events {
		g := decode[geminiResponse](t, []byte(ev.data))
		text += g.text()
		if last := i == len(events)-1; (g.UsageMetadata != nil) != last {
			t.Errorf("event %d usageMetadata %v: want it on the last event only", i, g.UsageMetadata)
		}
	}
	if text != "Hello from the" {
		t.Errorf("streamed text %q", text)
	}

	// Without alt=sse: one JSON array of the same responses.
	status, h, body := ts.roundTrip(t, geminiCall("/v1beta/models/g1:streamGenerateContent", "gk"))
	if status != http.StatusOK || h.Get("Content-Type") != "application/json" {
		t.Fatalf("array stream: status %d, Content-Type %q", status, h.Get("Content-Type"))
	}
	arr := decode[[]geminiResponse](t, body)
	if len(arr) != 3 || arr[2].UsageMetadata == nil || arr[2].UsageMetadata.TotalTokenCount != 30 {
		t.Errorf("array stream: %s", body)
	}
}

func TestGeminiCountTokensAndModels(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Models: []string{"g1", "g2"}})
	status, _, body := ts.roundTrip(t, geminiCall("/v1beta/models/g1:countTokens", "gk"))
	if status != http.StatusOK {
		t.Fatalf("countTokens: status %d", status)
	}
	if got := decode[struct{ TotalTokens int }](t, body).TotalTokens; got != 20 {
		t.Errorf("totalTokens = %d, want 20 (the prompt share)", got)
	}

	status, _, body = ts.roundTrip(t, call{method: http.MethodGet, path: "/v1beta/models", header: map[string]string{"x-goog-api-key": "gk"}})
	if status != http.StatusOK {
		t.Fatalf("models: status %d", status)
	}
	type model struct {
		Name                       string   `json:"name"`
		SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	}
	got := decode[struct{ Models []model }](t, body).Models
	methods := []string{"generateContent", "countTokens"}
	want := []model{{Name: "models/g1", SupportedGenerationMethods: methods}, {Name: "models/g2", SupportedGenerationMethods: methods}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("models mismatch (-want +got):\n%s", diff)
	}
}

// TestGeminiFailuresAndCounters: injected failures answer in Gemini's
// error shape; peak concurrency is counted per (key, path model); the
// request URI is recorded.
func TestGeminiFailuresAndCounters(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{RecordHeaders: true})
	c := geminiCall("/v1beta/models/g1:generateContent?alt=sse", "gk")
	c.header[HeaderFail], c.header[HeaderRetryAfter] = "429", "3"
	status, h, body := ts.roundTrip(t, c)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") != "3" {
		t.Fatalf("status %d, Retry-After %q", status, h.Get("Retry-After"))
	}
	type gerr struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	}
	got := decode[struct{ Error gerr }](t, body).Error
	if got.Code != 429 || got.Status != "RESOURCE_EXHAUSTED" || got.Message == "" {
		t.Errorf("error body %s", body)
	}
	if diff := cmp.Diff([]string{"/v1beta/models/g1:generateContent?alt=sse"}, ts.ReceivedURIs()); diff != "" {
		t.Errorf("URIs mismatch (-want +got):\n%s", diff)
	}

	hold := make(chan struct{})
	if err := ts.SetDefault(Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	wait := launchHeld(t, ts, []call{
		geminiCall("/v1beta/models/g1:generateContent", "gk"),
		geminiCall("/v1beta/models/g1:streamGenerateContent?alt=sse", "gk"),
		geminiCall("/v1beta/models/g2:countTokens", "gk"),
	})
	err := ts.WaitInFlight(waitCtx(t), 3)
	close(hold)
	if diff := cmp.Diff([]int{200, 200, 200}, wait()); diff != "" {
		t.Errorf("statuses mismatch (-want +got):\n%s", diff)
	}
	if err != nil {
		t.Fatal(err)
	}
	if p1, p2 := ts.Peak("gk", "g1"), ts.Peak("gk", "g2"); p1 != 2 || p2 != 1 {
		t.Errorf("peaks g1 %d, g2 %d; want 2 and 1", p1, p2)
	}
}

// TestHoldLast: a stream stops before its last chunk until HoldLast is
// closed, having sent the others.
func TestHoldLast(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Chunks: 4})
	last := make(chan struct{})
	if err := ts.SetDefault(Behavior{HoldLast: last}); err != nil {
		t.Fatal(err)
	}
	resp, err := ts.do(t.Context(), t, geminiCall("/v1beta/models/g1:streamGenerateContent?alt=sse", "gk"))
	if err != nil {
		close(last)
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "data: ") {
			close(last)
			t.Fatalf("event %d before the hold: %q, %v", i, line, err)
		}
		if _, err := br.ReadString('\n'); err != nil { // the blank line
			close(last)
			t.Fatal(err)
		}
	}
	close(last)
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), `"usageMetadata"`) {
		t.Errorf("after the hold: %q, %v", rest, err)
	}
}
