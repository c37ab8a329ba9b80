package upstreamtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testServer is a Server behind httptest with a client of its own.
type testServer struct {
	*Server
	base   string // e.g. http://127.0.0.1:1234
	client *http.Client
}

func newTestServer(t testing.TB, opts Options) *testServer {
	t.Helper()
	srv := NewServer(opts)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		// Close the fake first so hanging handlers return, then httptest.
		if err := srv.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
		ts.Close()
	})
	return &testServer{Server: srv, base: ts.URL, client: ts.Client()}
}

// call is one request to the fake.
type call struct {
	method string // default POST
	path   string
	key    string // sent as Bearer unless anthropic
	anth   bool   // send the key as x-api-key with anthropic-version
	body   string
	header map[string]string
}

func (ts *testServer) do(ctx context.Context, t testing.TB, c call) (*http.Response, error) {
	t.Helper()
	method := c.method
	if method == "" {
		method = http.MethodPost
	}
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, method, ts.base+c.path, body)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		if c.anth {
			req.Header.Set("x-api-key", c.key)
		} else {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
	}
	if c.anth {
		req.Header.Set("anthropic-version", "2023-06-01")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	return ts.client.Do(req)
}

// roundTrip sends c and returns the status, headers and whole body.
func (ts *testServer) roundTrip(t testing.TB, c call) (int, http.Header, []byte) {
	t.Helper()
	resp, err := ts.do(t.Context(), t, c)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, resp.Header, body
}

func decode[T any](t testing.TB, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %T: %v\nbody: %s", v, err, body)
	}
	return v
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data string
}

// readSSE reads events until the body ends; the error is the body's
// error, nil on a clean end.
func readSSE(r io.Reader) ([]sseEvent, error) {
	var events []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" || cur.name != "" {
				events = append(events, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		}
	}
	return events, sc.Err()
}

// waitCtx is a bounded context for barriers.
func waitCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func chatBody(model string, stream bool) string {
	var b bytes.Buffer
	b.WriteString(`{"model":`)
	m, _ := json.Marshal(model)
	b.Write(m)
	b.WriteString(`,"messages":[{"role":"user","content":"hi"}]`)
	if stream {
		b.WriteString(`,"stream":true`)
	}
	b.WriteString(`}`)
	return b.String()
}

func TestStartShutdown(t *testing.T) {
	srv := NewServer(Options{})
	url, err := srv.Start(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if got := srv.URL(); got != url {
		t.Errorf("URL() = %q, want %q", got, url)
	}
	if _, err := srv.Start(t.Context(), "127.0.0.1:0"); err == nil {
		t.Errorf("second Start: want an error")
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/chat/completions", strings.NewReader(chatBody("m", false)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status = %d, want 200", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// TestCloseEndsHang checks that Close ends a request that would otherwise
// hang forever, on a server started with Start.
func TestCloseEndsHang(t *testing.T) {
	srv := NewServer(Options{})
	url, err := srv.Start(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/chat/completions", strings.NewReader(chatBody("m", false)))
		req.Header.Set("Authorization", "Bearer k")
		req.Header.Set(HeaderFail, "hang")
		resp, err := client.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	if err := srv.WaitInFlight(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := <-errc; err == nil {
		t.Errorf("hanging request after Close: want an error, got a response")
	}
	if got := srv.InFlight(); got != 0 {
		t.Errorf("in flight after Close = %d, want 0", got)
	}
}

func TestRouting(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{MaxBodyBytes: 1024})
	tests := []struct {
		name       string
		c          call
		wantStatus int
		wantShape  string // "openai" or "anthropic" error shape, "" for success
	}{
		{name: "v1 prefix", c: call{path: "/v1/chat/completions", key: "k", body: chatBody("m", false)}, wantStatus: 200},
		{name: "other prefix", c: call{path: "/api/paas/v4/chat/completions", key: "k", body: chatBody("m", false)}, wantStatus: 200},
		{name: "unknown route", c: call{path: "/v1/nope", key: "k", body: "{}"}, wantStatus: 404, wantShape: "openai"},
		{name: "GET on POST route", c: call{method: http.MethodGet, path: "/v1/chat/completions", key: "k"}, wantStatus: 405, wantShape: "openai"},
		{name: "missing key openai", c: call{path: "/v1/chat/completions", body: chatBody("m", false)}, wantStatus: 401, wantShape: "openai"},
		{name: "missing key anthropic", c: call{path: "/v1/messages", anth: true, body: chatBody("m", false)}, wantStatus: 401, wantShape: "anthropic"},
		{name: "body too large", c: call{path: "/v1/messages", key: "k", anth: true, body: `{"model":"` + strings.Repeat("x", 2000) + `"}`}, wantStatus: 413, wantShape: "anthropic"},
		{name: "bad json", c: call{path: "/v1/chat/completions", key: "k", body: "{"}, wantStatus: 400, wantShape: "openai"},
		{name: "bad mock header", c: call{path: "/v1/messages", key: "k", anth: true, body: chatBody("m", false), header: map[string]string{HeaderLatency: "soon"}}, wantStatus: 400, wantShape: "anthropic"},
		{name: "bad failure mode", c: call{path: "/v1/chat/completions", key: "k", body: chatBody("m", false), header: map[string]string{HeaderFail: "explode"}}, wantStatus: 400, wantShape: "openai"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := ts.roundTrip(t, tt.c)
			if status != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", status, tt.wantStatus, body)
			}
			checkErrorShape(t, tt.wantShape, body)
		})
	}
}

// checkErrorShape asserts an error body in the given provider shape.
func checkErrorShape(t *testing.T, shape string, body []byte) {
	t.Helper()
	switch shape {
	case "openai":
		e := decode[struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Code    *string `json:"code"`
			} `json:"error"`
		}](t, body)
		if e.Error.Message == "" || e.Error.Type == "" {
			t.Errorf("OpenAI error body lacks message or type: %s", body)
		}
	case "anthropic":
		e := decode[struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}](t, body)
		if e.Type != "error" || e.Error.Type == "" || e.Error.Message == "" {
			t.Errorf("Anthropic error body has the wrong shape: %s", body)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
	}{
		{name: "plain", in: "gpt-4o"},
		{name: "quotes and backslash", in: `a"b\c`},
		{name: "control", in: "a\nb\tc\x01"},
		{name: "unicode", in: "modèle-日本"},
		{name: "invalid utf8", in: "a\xffb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := appendJSONString(nil, tt.in)
			want, err := json.Marshal(strings.ToValidUTF8(tt.in, "\uFFFD"))
			if err != nil {
				t.Fatal(err)
			}
			var a, b string
			if err := json.Unmarshal(got, &a); err != nil {
				t.Fatalf("output %s is not a JSON string: %v", got, err)
			}
			if err := json.Unmarshal(want, &b); err != nil {
				t.Fatal(err)
			}
			if a != b {
				t.Errorf("round trip = %q, want %q", a, b)
			}
		})
	}
}
