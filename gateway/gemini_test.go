package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

const geminiBody = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`

// geminiConn returns an enabled gemini-style connection to the fake upstream.
func (e *env) geminiConn(id, key string, models ...string) Connection {
	c := e.conn(id, key, models...)
	c.APIStyle, c.Provider, c.BaseURL = "gemini", "google", e.upURL+"/v1beta"
	return c
}

// geminiOpen sends a Gemini request, the client key in x-goog-api-key unless
// hdr sets another credential, and returns the response unread.
func (e *env) geminiOpen(ctx context.Context, method, path string, hdr ...string) *http.Response {
	e.t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(geminiBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.gwURL+path, body)
	if err != nil {
		e.t.Fatalf("new request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if len(hdr) == 0 {
		req.Header.Set("X-Goog-Api-Key", testClientKey)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// gemini is geminiOpen with the whole answer read.
func (e *env) gemini(ctx context.Context, method, path string, hdr ...string) reply {
	e.t.Helper()
	resp := e.geminiOpen(ctx, method, path, hdr...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Errorf("%s %s: read body: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// geminiError is Gemini's error shape, decoded.
type geminiError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type       string            `json:"@type"`
			RetryDelay string            `json:"retryDelay"`
			Reason     string            `json:"reason"`
			Domain     string            `json:"domain"`
			Metadata   map[string]string `json:"metadata"`
		} `json:"details"`
	} `json:"error"`
}

func decodeGeminiError(t *testing.T, r reply) geminiError {
	t.Helper()
	var ge geminiError
	if err := json.Unmarshal([]byte(r.body), &ge); err != nil || ge.Error.Code != r.status || ge.Error.Status == "" || ge.Error.Message == "" {
		t.Fatalf("not a Gemini error for status %d (%v): %s", r.status, err, r.body)
	}
	return ge
}

// reason returns the ErrorInfo reason and the RetryInfo delay of ge.
func (ge geminiError) reason() (reason, retryDelay string) {
	for _, d := range ge.Error.Details {
		switch d.Type {
		case "type.googleapis.com/google.rpc.ErrorInfo":
			reason = d.Reason
		case "type.googleapis.com/google.rpc.RetryInfo":
			retryDelay = d.RetryDelay
		}
	}
	return reason, retryDelay
}

// TestGeminiEndToEnd is issue 26's first "done when": generateContent,
// streamGenerateContent?alt=sse and countTokens through a gemini connection
// whose model cap is 1, over real HTTP to the fake upstream. The upstream
// never sees two at once; a stream's chunks reach the client while the
// upstream still holds back its last; countTokens takes no slot; a wait
// bound that runs out is 429 with RetryInfo; usage comes from usageMetadata
// (thoughts included); the client key, in any of its three places, never
// reaches the upstream, and the stored key does.
func TestGeminiEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Chunks: 4, RecordHeaders: true})
	const stored = "stored-upstream-key-0123456789"
	c := e.geminiConn("g1", stored, "gemini-x")
	c.Overrides = caps(0, map[string]int{"gemini-x": 1}, 30000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)
	gate := "model:g1:gemini-x"

	// A burst of generations and streams, the key in each of its places:
	// all served, one at a time upstream.
	paths := []struct{ path, key, where string }{
		{"/v1beta/models/gemini-x:generateContent", "X-Goog-Api-Key", "header"},
		{"/v1beta/models/gemini-x:generateContent?key=" + testClientKey, "", "query"},
		{"/v1/models/gemini-x:generateContent", "Authorization", "bearer"},
		{"/v1beta/models/models/gemini-x:streamGenerateContent?alt=sse", "X-Goog-Api-Key", "header"},
		{"/v1beta/models/gemini-x:streamGenerateContent?alt=sse&key=" + testClientKey, "", "query"},
		{"/v1beta/models/gemini-x:generateContent", "X-Goog-Api-Key", "header"},
	}
	var wg sync.WaitGroup
	for _, p := range paths {
		wg.Go(func() {
			var hdr []string
			switch p.where {
			case "header":
				hdr = []string{p.key, testClientKey}
			case "bearer":
				hdr = []string{p.key, "Bearer " + testClientKey}
			case "query":
				hdr = []string{"Accept", "*/*"}
			}
			r := e.gemini(ctx, http.MethodPost, p.path, hdr...)
			if r.status != http.StatusOK || !strings.Contains(r.body, `"usageMetadata"`) {
				t.Errorf("%s (key in %s) = %d %s", p.path, p.where, r.status, r.body)
			}
		})
	}
	wg.Wait()
	if got := e.up.Peak(stored, "gemini-x"); got != 1 {
		t.Errorf("upstream peak = %d, want 1 (the model cap)", got)
	}
	served := int64(len(paths))

	// A stream held before its last chunk: the others are already relayed.
	last := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{HoldLast: last}); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(last)
		}
	}
	defer release()
	resp := e.geminiOpen(ctx, http.MethodPost, "/v1beta/models/gemini-x:streamGenerateContent?alt=sse")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "data: ") || strings.Contains(line, "usageMetadata") {
			t.Fatalf("chunk %d before the upstream sent the last: %q, %v", i+1, line, err)
		}
		if blank, err := br.ReadString('\n'); err != nil || strings.TrimSpace(blank) != "" {
			t.Fatalf("chunk %d: no blank line after it: %q, %v", i+1, blank, err)
		}
	}
	if g := e.gate(gate); g.InFlight != 1 {
		t.Fatalf("gate %s in flight = %d mid-stream, want 1", gate, g.InFlight)
	}

	// The slot is taken: countTokens needs none, a generation waits out a
	// short bound and gets Gemini's 429.
	r := e.gemini(ctx, http.MethodPost, "/v1beta/models/gemini-x:countTokens")
	if r.status != http.StatusOK || !strings.Contains(r.body, `"totalTokens":20`) {
		t.Errorf("countTokens while the slot is taken = %d %s, want 200", r.status, r.body)
	}
	c.Overrides = caps(0, map[string]int{"gemini-x": 1}, 100)
	e.gw.Apply(Config{Connections: []Connection{c}})
	r = e.gemini(ctx, http.MethodPost, "/v1beta/models/gemini-x:generateContent")
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || r.header.Get(HeaderGate) != gate {
		t.Fatalf("generation past a full wait bound = %d (Retry-After %q, gate %q) %s", r.status, r.header.Get("Retry-After"), r.header.Get(HeaderGate), r.body)
	}
	ge := decodeGeminiError(t, r)
	reason, delay := ge.reason()
	if ge.Error.Status != "RESOURCE_EXHAUSTED" || reason != "SEMAPHORE_TIMEOUT" || delay != r.header.Get("Retry-After")+"s" {
		t.Errorf("429 body: status %s, reason %q, retryDelay %q (Retry-After %s)", ge.Error.Status, reason, delay, r.header.Get("Retry-After"))
	}

	release()
	rest, err := io.ReadAll(br)
	if err != nil || strings.Count(string(rest), "data: ") != 1 || !strings.Contains(string(rest), `"usageMetadata"`) {
		t.Errorf("rest of the stream: %q, %v; want the last chunk with usageMetadata", rest, err)
	}
	served++
	waitFor(t, 5*time.Second, "the stream's slot back", func() bool { return e.gate(gate).InFlight == 0 })

	// Usage from usageMetadata: 20 prompt, 7 candidates + 3 thoughts each.
	in := counter(t, e.gw.metrics.ClientTokens.WithLabelValues("test", "input"))
	out := counter(t, e.gw.metrics.ClientTokens.WithLabelValues("test", "output"))
	if in != float64(20*served) || out != float64(10*served) {
		t.Errorf("tokens counted = %v in, %v out; want %d and %d (%d answers)", in, out, 20*served, 10*served, served)
	}

	// Credentials: the stored key reached the upstream, the client key never.
	if key, _ := e.up.LastKey("gemini-x"); key != stored || e.up.SawKey(testClientKey) {
		t.Errorf("upstream keys: last %q, saw the client key: %v", key, e.up.SawKey(testClientKey))
	}
	for i, h := range e.up.ReceivedHeaders() {
		for k, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, testClientKey) {
					t.Errorf("request %d: the client key reached the upstream in %s", i, k)
				}
			}
		}
		if got := h.Get("X-Goog-Api-Key"); got != stored {
			t.Errorf("request %d: x-goog-api-key %q, want the stored key", i, got)
		}
	}
	streams := 0
	for _, u := range e.up.ReceivedURIs() {
		if strings.Contains(u, "key=") || !strings.HasPrefix(u, "/v1beta/models/gemini-x:") {
			t.Errorf("upstream URI %q: want /v1beta/models/gemini-x:… without a key", u)
		}
		if strings.Contains(u, ":streamGenerateContent") {
			streams++
			if !strings.HasSuffix(u, "?alt=sse") {
				t.Errorf("stream URI %q: alt=sse not passed on", u)
			}
		}
	}
	if streams != 3 {
		t.Errorf("%d streams reached the upstream, want 3", streams)
	}
}

// TestGeminiArrayStream: a stream without alt=sse (one JSON array) is
// relayed piece by piece, and its usage counted.
func TestGeminiArrayStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Chunks: 3})
	e.gw.Apply(Config{Connections: []Connection{e.geminiConn("g1", "k1", "gemini-x")}})
	last := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{HoldLast: last}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		select {
		case <-last:
		default:
			close(last)
		}
	}()
	resp := e.geminiOpen(testCtx(t), http.MethodPost, "/v1beta/models/gemini-x:streamGenerateContent")
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// Two whole elements arrive while the upstream holds the third:
	// "[{…},\r\n{…}", each ending with its responseId.
	var got string
	for strings.Count(got, `"responseId"`) < 2 || !strings.HasSuffix(got, `"}`) {
		part, err := br.ReadString('}')
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got += part
	}
	close(last)
	rest, err := io.ReadAll(br)
	if err != nil || !strings.HasSuffix(string(rest), "]") || !strings.Contains(string(rest), "usageMetadata") {
		t.Fatalf("rest %q, %v", rest, err)
	}
	if got := counter(t, e.gw.metrics.ClientTokens.WithLabelValues("test", "output")); got != 10 {
		t.Errorf("output tokens = %v, want 10", got)
	}
}

// TestGeminiRoutesAndErrors: a Gemini route reaches only gemini connections
// and an OpenAI route only openai ones; unknown paths under /v1 and /v1beta
// are 404 in the OpenAI and Gemini shapes; Gemini's other errors (no key,
// a bad key, a model the key may not use) are in its shape too.
func TestGeminiRoutesAndErrors(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		testClientKey:            {ID: "test-key", Name: "test", Enabled: true},
		"sk-openai-only-0000000": {ID: "k2", Name: "zai-only", Enabled: true, Limits: limits.ClientKeyLimits{Models: []string{"zai/*"}}},
	}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5"), e.geminiConn("g1", "k2", "gemini-x")}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)

	tests := []struct {
		name, method, path string
		hdr                []string
		status             int
		geminiStatus       string // "" = the OpenAI shape
		code               string
	}{
		{"unknown /v1beta path, POST", http.MethodPost, "/v1beta/nope", nil, 404, "NOT_FOUND", CodeNotFound},
		{"unknown /v1beta path", http.MethodGet, "/v1beta/files", nil, 404, "NOT_FOUND", CodeNotFound},
		{"a model method not served", http.MethodPost, "/v1beta/models/gemini-x:embedContent", nil, 404, "NOT_FOUND", CodeNotFound},
		{"an openai model on a Gemini route", http.MethodPost, "/v1beta/models/glm-5:generateContent", nil, 404, "NOT_FOUND", CodeModelNotFound},
		{"no key", http.MethodPost, "/v1beta/models/gemini-x:generateContent", []string{"Accept", "*/*"}, 401, "UNAUTHENTICATED", CodeMissingKey},
		{"a bad key", http.MethodPost, "/v1beta/models/gemini-x:generateContent?key=nope", []string{"Accept", "*/*"}, 401, "UNAUTHENTICATED", CodeInvalidKey},
		{"a model the key may not use", http.MethodPost, "/v1beta/models/gemini-x:countTokens", []string{"X-Goog-Api-Key", "sk-openai-only-0000000"}, 403, "PERMISSION_DENIED", CodeModelNotAllowed},
		{"GET on a POST route", http.MethodGet, "/v1beta/models/gemini-x:generateContent", nil, 405, "UNIMPLEMENTED", CodeMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.gemini(ctx, tt.method, tt.path, tt.hdr...)
			if r.status != tt.status || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
				t.Fatalf("status %d (%s), want %d JSON; body %s", r.status, r.header.Get("Content-Type"), tt.status, r.body)
			}
			ge := decodeGeminiError(t, r)
			if reason, _ := ge.reason(); ge.Error.Status != tt.geminiStatus || reason != tt.code {
				t.Errorf("status %q reason %q, want %q %q", ge.Error.Status, reason, tt.geminiStatus, tt.code)
			}
		})
	}
	for _, path := range []string{"/v1/nope", "/v1"} {
		r := e.post(ctx, path, "{}")
		if r.status != http.StatusNotFound || r.errorCode(t) != CodeNotFound {
			t.Errorf("%s = %d %s, want 404 NOT_FOUND in the OpenAI shape", path, r.status, r.body)
		}
	}
	if r := e.post(ctx, "/v1/chat/completions", chatBody("gemini-x", false)); r.status != http.StatusNotFound || r.errorCode(t) != CodeModelNotFound {
		t.Errorf("a gemini model on the OpenAI route = %d %s, want 404 MODEL_NOT_FOUND", r.status, r.body)
	}
}

// TestGeminiModelList: GET /v1beta/models lists, in Gemini's shape, the
// models of gemini connections the key may use, with the aliases that name
// them; GET /v1beta/models/{model} answers one.
func TestGeminiModelList(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		testClientKey: {ID: "test-key", Name: "test", Enabled: true, Limits: limits.ClientKeyLimits{Models: []string{"google/gemini-x"}}},
	}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	e.gw.Apply(Config{
		Settings:    limits.Settings{Aliases: map[string]string{"flash": "gemini-x", "pro": "gemini-y", "chat": "glm-5"}},
		Connections: []Connection{e.conn("c1", "k1", "glm-5"), e.geminiConn("g1", "k2", "gemini-x", "gemini-y")},
		ClientKeys:  keyConfig(keys),
	})
	ctx := testCtx(t)
	r := e.gemini(ctx, http.MethodGet, "/v1beta/models")
	var list struct {
		Models []struct {
			Name                       string   `json:"name"`
			SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
		} `json:"models"`
	}
	if err := json.Unmarshal([]byte(r.body), &list); err != nil || r.status != http.StatusOK {
		t.Fatalf("list = %d %s (%v)", r.status, r.body, err)
	}
	var names []string
	for _, m := range list.Models {
		names = append(names, m.Name)
	}
	if got, want := strings.Join(names, " "), "models/flash models/gemini-x models/google/gemini-x"; got != want {
		t.Errorf("listed %q, want %q", got, want)
	}
	if r := e.gemini(ctx, http.MethodGet, "/v1beta/models/flash"); r.status != http.StatusOK || !strings.Contains(r.body, `"name":"models/flash"`) {
		t.Errorf("one model = %d %s", r.status, r.body)
	}
	if r := e.gemini(ctx, http.MethodGet, "/v1beta/models/gemini-y"); r.status != http.StatusNotFound {
		t.Errorf("a model the key may not use = %d %s, want 404", r.status, r.body)
	}
}

// TestQueryNotForwarded: the client's query string stays at the gateway on
// every route, but for Gemini's alt.
func TestQueryNotForwarded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{RecordHeaders: true})
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5"), e.geminiConn("g1", "k2", "gemini-x")}})
	ctx := testCtx(t)
	if r := e.post(ctx, "/v1/chat/completions?key=secret&api-version=1", chatBody("glm-5", false)); r.status != http.StatusOK {
		t.Fatalf("chat = %d %s", r.status, r.body)
	}
	if r := e.gemini(ctx, http.MethodPost, "/v1beta/models/gemini-x:generateContent?key="+testClientKey+"&alt=json&x=1", "Accept", "*/*"); r.status != http.StatusOK {
		t.Fatalf("gemini = %d %s", r.status, r.body)
	}
	want := "/v1/chat/completions /v1beta/models/gemini-x:generateContent?alt=json"
	if got := strings.Join(e.up.ReceivedURIs(), " "); got != want {
		t.Errorf("upstream URIs %q, want %q", got, want)
	}
}

// TestGeminiFailover: a gemini connection answering 503 fails over to the
// next; when every one answers 429 the client gets the upstream's answer,
// and the next request, with both cooling down, Gatehouse's own 429
// UPSTREAM_COOLDOWN in Gemini's shape with RetryInfo.
func TestGeminiFailover(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	g1, g2 := e.geminiConn("g1", "k1", "gemini-x"), e.geminiConn("g2", "k2", "gemini-x")
	g1.Priority = 10
	e.gw.Apply(Config{Connections: []Connection{g1, g2}})
	ctx := testCtx(t)
	if err := e.up.SetKeyBehavior("k1", upstreamtest.Behavior{Fail: "503"}); err != nil {
		t.Fatal(err)
	}
	r := e.gemini(ctx, http.MethodPost, "/v1beta/models/gemini-x:generateContent")
	if r.status != http.StatusOK || r.header.Get(HeaderConnection) != "conn-g2" {
		t.Fatalf("after g1's 503 = %d via %q %s, want 200 via conn-g2", r.status, r.header.Get(HeaderConnection), r.body)
	}
	for _, k := range []string{"k1", "k2"} {
		if err := e.up.SetKeyBehavior(k, upstreamtest.Behavior{Fail: "429", RetryAfter: 30 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	r = e.gemini(ctx, http.MethodPost, "/v1beta/models/gemini-x:generateContent")
	if ge := decodeGeminiError(t, r); r.status != http.StatusTooManyRequests || ge.Error.Status != "RESOURCE_EXHAUSTED" {
		t.Fatalf("every connection 429 = %d %s, want the upstream's 429", r.status, r.body)
	}
	r = e.gemini(ctx, http.MethodPost, "/v1beta/models/gemini-x:generateContent")
	ge := decodeGeminiError(t, r)
	reason, delay := ge.reason()
	if r.status != http.StatusTooManyRequests || reason != CodeUpstreamCooldown || delay == "" || delay != r.header.Get("Retry-After")+"s" {
		t.Errorf("both cooling = %d (Retry-After %q) %s, want 429 UPSTREAM_COOLDOWN with RetryInfo", r.status, r.header.Get("Retry-After"), r.body)
	}
}
