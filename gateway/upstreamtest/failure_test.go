package upstreamtest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStatusFailures(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	tests := []struct {
		name           string
		fail           string
		retryAfter     string
		anth           bool
		wantStatus     int
		wantRetryAfter string
		wantType       string
	}{
		{name: "429 openai", fail: "429", retryAfter: "7", wantStatus: 429, wantRetryAfter: "7", wantType: "requests"},
		{name: "429 anthropic", fail: "429", retryAfter: "2", anth: true, wantStatus: 429, wantRetryAfter: "2", wantType: "rate_limit_error"},
		{name: "429 without Retry-After", fail: "429", wantStatus: 429, wantType: "requests"},
		{name: "401 openai", fail: "401", wantStatus: 401, wantType: "invalid_request_error"},
		{name: "401 anthropic", fail: "401", anth: true, wantStatus: 401, wantType: "authentication_error"},
		{name: "403 openai", fail: "403", wantStatus: 403, wantType: "permission_error"},
		{name: "403 anthropic", fail: "403", anth: true, wantStatus: 403, wantType: "permission_error"},
		{name: "400", fail: "400", wantStatus: 400, wantType: "invalid_request_error"},
		{name: "404 anthropic", fail: "404", anth: true, wantStatus: 404, wantType: "not_found_error"},
		{name: "500 openai", fail: "500", wantStatus: 500, wantType: "server_error"},
		{name: "500 anthropic", fail: "500", anth: true, wantStatus: 500, wantType: "api_error"},
		{name: "529 anthropic", fail: "529", anth: true, wantStatus: 529, wantType: "overloaded_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := call{path: "/v1/chat/completions", key: "k", body: chatBody("m", true), header: map[string]string{HeaderFail: tt.fail}}
			if tt.anth {
				c.path, c.anth = "/v1/messages", true
			}
			if tt.retryAfter != "" {
				c.header[HeaderRetryAfter] = tt.retryAfter
			}
			status, h, body := ts.roundTrip(t, c)
			if status != tt.wantStatus {
				t.Fatalf("status = %d, want %d", status, tt.wantStatus)
			}
			if got := h.Get("Retry-After"); got != tt.wantRetryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.wantRetryAfter)
			}
			var gotType string
			if tt.anth {
				checkErrorShape(t, "anthropic", body)
				gotType = decode[struct {
					Error struct{ Type string } `json:"error"`
				}](t, body).Error.Type
			} else {
				checkErrorShape(t, "openai", body)
				gotType = decode[struct {
					Error struct{ Type string } `json:"error"`
				}](t, body).Error.Type
			}
			if gotType != tt.wantType {
				t.Errorf("error type = %q, want %q", gotType, tt.wantType)
			}
		})
	}
}

func TestFailReset(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	for _, stream := range []bool{false, true} {
		resp, err := ts.do(t.Context(), t, call{path: "/v1/chat/completions", key: "k", body: chatBody("m", stream), header: map[string]string{HeaderFail: "reset"}})
		if err == nil {
			resp.Body.Close()
			t.Fatalf("stream=%v: got status %d, want a connection error", stream, resp.StatusCode)
		}
	}
	if err := ts.WaitInFlight(waitCtx(t), 0); err != nil {
		t.Fatal(err)
	}
	if got := ts.Stats().Total.Failures; got != 2 {
		t.Errorf("failures = %d, want 2", got)
	}
}

func TestFailStreamCut(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Chunks: 6})
	tests := []struct {
		name  string
		c     call
		wantN int // events read before the cut
	}{
		{name: "openai", c: call{path: "/v1/chat/completions", key: "k", body: chatBody("m", true)}, wantN: 3},
		{name: "anthropic", c: call{path: "/v1/messages", key: "k", anth: true, body: chatBody("m", true)}, wantN: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.header = map[string]string{HeaderFail: "stream-cut"}
			resp, err := ts.do(t.Context(), t, tt.c)
			if err != nil {
				t.Fatalf("request: %v (want a started stream)", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200 before the cut", resp.StatusCode)
			}
			events, err := readSSE(resp.Body)
			if err == nil {
				t.Fatalf("stream ended cleanly after %d events; want a broken stream", len(events))
			}
			if len(events) != tt.wantN {
				t.Errorf("read %d events before the cut, want %d", len(events), tt.wantN)
			}
		})
	}
}

func TestFailHang(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		resp, err := ts.do(ctx, t, call{path: "/v1/chat/completions", key: "k", body: chatBody("m", false), header: map[string]string{HeaderFail: "hang"}})
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	if err := ts.WaitInFlight(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("hanging request error = %v, want context.Canceled", err)
	}
	if err := ts.WaitInFlight(waitCtx(t), 0); err != nil {
		t.Errorf("handler did not end after the client left: %v", err)
	}
}

// TestLatencyEndsWithClient checks that a long latency ends when the client
// goes away instead of holding the handler.
func TestLatencyEndsWithClient(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{Latency: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		resp, err := ts.do(ctx, t, call{path: "/v1/chat/completions", key: "k", body: chatBody("m", false)})
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	if err := ts.WaitInFlight(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("request error = %v, want context.Canceled", err)
	}
	if err := ts.WaitInFlight(waitCtx(t), 0); err != nil {
		t.Errorf("handler did not end after the client left: %v", err)
	}
}

func TestFailTimes(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	if err := ts.SetKeyBehavior("A", Behavior{Fail: "500", FailTimes: 5}); err != nil {
		t.Fatal(err)
	}
	var got []int
	for range 7 {
		status, _, _ := ts.roundTrip(t, call{path: "/v1/chat/completions", key: "A", body: chatBody("m", false)})
		got = append(got, status)
	}
	status, _, _ := ts.roundTrip(t, call{path: "/v1/chat/completions", key: "B", body: chatBody("m", false)})
	got = append(got, status)
	want := []int{500, 500, 500, 500, 500, 200, 200, 200}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("statuses mismatch (-want +got):\n%s", diff)
	}
	if f := ts.Stats().ByKey["A"].Failures; f != 5 {
		t.Errorf("failures of A = %d, want 5", f)
	}
}

func TestBehaviorLayers(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	if err := ts.SetDefault(Behavior{Fail: "429", RetryAfter: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := ts.SetKeyBehavior("good", Behavior{Fail: FailNone}); err != nil {
		t.Fatal(err)
	}
	if err := ts.SetKeyBehavior("bad", Behavior{Fail: "x"}); err == nil {
		t.Errorf("SetKeyBehavior with an unknown failure: want an error")
	}
	tests := []struct {
		name           string
		key            string
		header         map[string]string
		wantStatus     int
		wantRetryAfter string
	}{
		{name: "default applies", key: "other", wantStatus: 429, wantRetryAfter: "2"},
		{name: "key overrides default", key: "good", wantStatus: 200},
		{name: "header overrides key", key: "good", header: map[string]string{HeaderFail: "403"}, wantStatus: 403, wantRetryAfter: "2"},
		{name: "header none overrides default", key: "other", header: map[string]string{HeaderFail: "none"}, wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, _ := ts.roundTrip(t, call{path: "/v1/chat/completions", key: tt.key, body: chatBody("m", false), header: tt.header})
			if status != tt.wantStatus {
				t.Errorf("status = %d, want %d", status, tt.wantStatus)
			}
			if got := h.Get("Retry-After"); got != tt.wantRetryAfter {
				t.Errorf("Retry-After = %q, want %q", got, tt.wantRetryAfter)
			}
		})
	}
	ts.ClearBehaviors()
	if status, _, _ := ts.roundTrip(t, call{path: "/v1/chat/completions", key: "other", body: chatBody("m", false)}); status != 200 {
		t.Errorf("after ClearBehaviors status = %d, want 200", status)
	}
}

// TestHoldReleases checks the Hold barrier: requests wait until released
// and then answer normally.
func TestHoldReleases(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	hold := make(chan struct{})
	if err := ts.SetKeyBehavior("k", Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		resp, err := ts.do(t.Context(), t, call{path: "/v1/chat/completions", key: "k", body: chatBody("m", false)})
		if err != nil {
			done <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	if err := ts.WaitInFlight(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	close(hold)
	if status := <-done; status != http.StatusOK {
		t.Errorf("status after release = %d, want 200", status)
	}
}

// TestBehaviorHeader: a behaviour's Header reaches normal answers (plain
// and streamed, both styles) and injected failures, and a key's Header
// replaces the default's.
func TestBehaviorHeader(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	if err := ts.SetDefault(Behavior{Header: http.Header{"X-Default": {"d"}}}); err != nil {
		t.Fatal(err)
	}
	if err := ts.SetKeyBehavior("rl", Behavior{Header: http.Header{"x-ratelimit-remaining-requests": {"0"}, "X-Ratelimit-Reset-Requests": {"2s"}}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		c         call
		want      int
		wantReset string
		wantDef   string
	}{
		{name: "chat", c: call{path: "/v1/chat/completions", key: "rl", body: chatBody("m", false)}, want: 200, wantReset: "2s"},
		{name: "chat stream", c: call{path: "/v1/chat/completions", key: "rl", body: chatBody("m", true)}, want: 200, wantReset: "2s"},
		{name: "messages", c: call{path: "/v1/messages", anth: true, key: "rl", body: chatBody("m", false)}, want: 200, wantReset: "2s"},
		{name: "injected 429", c: call{path: "/v1/chat/completions", key: "rl", body: chatBody("m", false), header: map[string]string{HeaderFail: "429"}}, want: 429, wantReset: "2s"},
		{name: "default for other keys", c: call{path: "/v1/chat/completions", key: "other", body: chatBody("m", false)}, want: 200, wantDef: "d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, _ := ts.roundTrip(t, tt.c)
			if status != tt.want {
				t.Fatalf("status = %d, want %d", status, tt.want)
			}
			if got := h.Get("X-Ratelimit-Reset-Requests"); got != tt.wantReset {
				t.Errorf("reset header = %q, want %q", got, tt.wantReset)
			}
			if tt.wantReset != "" && h.Get("X-Ratelimit-Remaining-Requests") != "0" {
				t.Errorf("remaining header = %q, want 0 (name canonicalised)", h.Get("X-Ratelimit-Remaining-Requests"))
			}
			if got := h.Get("X-Default"); got != tt.wantDef {
				t.Errorf("X-Default = %q, want %q (a key's Header replaces the default's)", got, tt.wantDef)
			}
		})
	}
}
