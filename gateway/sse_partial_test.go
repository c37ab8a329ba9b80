package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// sseEvents splits an event stream into its events (per the SSE rules:
// lines end in CRLF, LF or CR, a blank line ends an event) and returns each
// event's type and joined data.
func sseEvents(body string) (types, data []string) {
	body = strings.ReplaceAll(body, "\r\n", "\n")
	body = strings.ReplaceAll(body, "\r", "\n")
	var typ string
	var lines []string
	for line := range strings.SplitSeq(body, "\n") {
		if line == "" {
			if lines != nil {
				types = append(types, typ)
				data = append(data, strings.Join(lines, "\n"))
			}
			typ, lines = "", nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			typ = value
		case "data":
			lines = append(lines, value)
		}
	}
	return types, data
}

// partialEventUpstream answers every request with one complete event and the
// first half of a second one, then breaks the connection (cut) or goes
// silent until the request ends (hang).
func partialEventUpstream(t *testing.T, nl string, cut bool) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_, _ = io.WriteString(w, "event: content_block_delta"+nl+`data: {"type":"content_block_delta","choices":[{"delta":{"content":"Hi"}}]}`+nl+nl)
		_ = rc.Flush()
		_, _ = io.WriteString(w, `event: content_block_delta`+nl+`data: {"type":"content_block_delta","choices":[{"del`)
		_ = rc.Flush()
		if cut {
			panic(http.ErrAbortHandler)
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// An upstream stream that breaks (or hits the execution bound) in the middle
// of an event must still end, for the client, with a well-formed SSE error
// event: the incomplete event is not sent, so the error event does not get
// glued onto it (which SDKs report as a JSON syntax error instead of the
// gateway's error).
func TestStreamErrorAfterPartialEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		style string
		nl    string
		cut   bool
		code  string
	}{
		{name: "openai cut LF", style: "openai", nl: "\n", cut: true, code: CodeUpstreamStreamErr},
		{name: "openai cut CRLF", style: "openai", nl: "\r\n", cut: true, code: CodeUpstreamStreamErr},
		{name: "anthropic cut LF", style: "anthropic", nl: "\n", cut: true, code: CodeUpstreamStreamErr},
		{name: "openai execution bound", style: "openai", nl: "\n", code: CodeExecutionTimeout},
		{name: "anthropic execution bound CR", style: "anthropic", nl: "\r", code: CodeExecutionTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			upURL := partialEventUpstream(t, tc.nl, tc.cut)
			gw := New(Options{Outbound: *testOutbound, Authenticate: func(_ context.Context, s string) (ClientKey, bool) {
				return ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
			}})
			gwSrv := httptest.NewServer(gw)
			t.Cleanup(func() { gwSrv.Close(); gw.Close() })
			gw.Apply(Config{Connections: []Connection{{
				ID: "c1", Name: "c1", Provider: "p", APIStyle: tc.style, BaseURL: upURL + "/v1",
				APIKey: "k", Models: []string{"m"}, Enabled: true,
				Overrides: limits.Overrides{ExecutionMaxWaitMs: ptr(2000)}, // fires mid-stream, however slow the machine is to start it
			}}})
			path := "/v1/chat/completions"
			if tc.style == "anthropic" {
				path = "/v1/messages"
			}
			req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, gwSrv.URL+path,
				strings.NewReader(`{"model":"m","stream":true}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Api-Key", testClientKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200: %s", resp.StatusCode, body)
			}
			types, data := sseEvents(string(body))
			if len(data) != 2 {
				t.Fatalf("want the complete event and an error event, got %d events in %q", len(data), body)
			}
			for i, d := range data {
				if !json.Valid([]byte(d)) {
					t.Errorf("event %d data is not JSON: %q (body %q)", i, d, body)
				}
			}
			last := reply{body: data[1]}
			if code := last.errorCode(t); code != tc.code {
				t.Errorf("error event code = %q, want %s", code, tc.code)
			}
			if tc.style == "anthropic" && types[1] != "error" {
				t.Errorf("last event type = %q, want error", types[1])
			}
		})
	}
}

// Holding back unfinished events changes when bytes are sent, never which:
// an event split across writes arrives whole, and a stream that ends without
// finishing its last event is passed on byte for byte.
func TestStreamSplitEventsPassThrough(t *testing.T) {
	t.Parallel()
	parts := []string{"data: {\"a\"", ":1}\n", "\n: ping\r\n\r\ndata: {\"b\":2}\r", "\r", "data: [DONE]"}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, p := range parts {
			_, _ = io.WriteString(w, p)
			_ = rc.Flush()
		}
	}))
	t.Cleanup(up.Close)
	resp := streamThrough(t, up)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(parts, ""); string(body) != want {
		t.Errorf("body = %q, want %q", body, want)
	}
}

// A keep-alive comment reaches the client at once, even without a blank
// line after it.
func TestStreamKeepAliveCommentPassesAtOnce(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_, _ = io.WriteString(w, ": keep-alive\n")
		_ = rc.Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: {}\n\n")
	}))
	t.Cleanup(up.Close)
	resp := streamThrough(t, up)
	defer resp.Body.Close()
	first := make([]byte, len(": keep-alive\n"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != ": keep-alive\n" {
		t.Fatalf("first bytes %q, %v", first, err)
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "data: {}\n\n" {
		t.Errorf("rest %q, %v", rest, err)
	}
}

// streamThrough puts a gateway with one OpenAI-style connection (model m) in front of
// up and returns the answer to a streaming chat request through it.
func streamThrough(t *testing.T, up *httptest.Server) *http.Response {
	t.Helper()
	gw := New(Options{Outbound: *testOutbound, Authenticate: func(_ context.Context, s string) (ClientKey, bool) {
		return ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
	}})
	gwSrv := httptest.NewServer(gw)
	t.Cleanup(func() { gwSrv.Close(); gw.Close() })
	gw.Apply(Config{Connections: []Connection{{
		ID: "c1", Name: "c1", Provider: "p", APIStyle: "openai", BaseURL: up.URL + "/v1",
		APIKey: "k", Models: []string{"m"}, Enabled: true,
	}}})
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, gwSrv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testClientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestSSEWriter: the relay's writer sends whole events as their ends
// arrive, holds back an unfinished one, passes it on as it is when the
// stream ends, and drops it when an event of the gateway's own follows.
func TestSSEWriter(t *testing.T) {
	t.Parallel()
	newWriter := func() (*sseWriter, *httptest.ResponseRecorder) {
		rec := httptest.NewRecorder()
		return &sseWriter{w: rec, rc: http.NewResponseController(rec)}, rec
	}
	write := func(t *testing.T, s *sseWriter, rec *httptest.ResponseRecorder, in, want string) {
		t.Helper()
		if err := s.write([]byte(in)); err != nil {
			t.Fatalf("write(%q): %v", in, err)
		}
		if got := rec.Body.String(); got != want {
			t.Fatalf("after write(%q) the client has %q, want %q", in, got, want)
		}
	}

	t.Run("events across reads", func(t *testing.T) {
		t.Parallel()
		s, rec := newWriter()
		write(t, s, rec, "data: 1\n\ndata: {", "data: 1\n\n")
		write(t, s, rec, `"a":1}`, "data: 1\n\n")
		write(t, s, rec, "\n\n: ping\n", "data: 1\n\ndata: {\"a\":1}\n\n: ping\n")
		if !rec.Flushed {
			t.Error("the writer did not flush")
		}
		s.end(nil)
		if got, want := rec.Body.String(), "data: 1\n\ndata: {\"a\":1}\n\n: ping\n"; got != want {
			t.Errorf("after end the client has %q, want %q", got, want)
		}
	})
	t.Run("unfinished event at the end passes as it is", func(t *testing.T) {
		t.Parallel()
		s, rec := newWriter()
		write(t, s, rec, "data: 1\n\ndata: 2", "data: 1\n\n")
		s.end([]byte("\n"))
		if got, want := rec.Body.String(), "data: 1\n\ndata: 2\n"; got != want {
			t.Errorf("after end the client has %q, want %q", got, want)
		}
	})
	t.Run("own event drops the unfinished one", func(t *testing.T) {
		t.Parallel()
		s, rec := newWriter()
		write(t, s, rec, "data: 1\n\ndata: {\"half", "data: 1\n\n")
		s.event([]byte("event: error\ndata: {}\n\n"))
		if got, want := rec.Body.String(), "data: 1\n\nevent: error\ndata: {}\n\n"; got != want {
			t.Errorf("the client has %q, want %q", got, want)
		}
	})
	t.Run("no boundary past the bound stops holding back", func(t *testing.T) {
		t.Parallel()
		s, rec := newWriter()
		big := "data: " + strings.Repeat("x", maxHeldEvent)
		write(t, s, rec, big, big)
	})
}
