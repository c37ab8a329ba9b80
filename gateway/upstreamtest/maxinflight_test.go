package upstreamtest

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestMaxInFlight: with two requests of a key held, a third of that key gets
// 429 at once with a body naming concurrency and no Retry-After, another key
// is not limited, and raising the limit at run time lets the third through.
func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	hold := make(chan struct{})
	if err := ts.SetKeyBehavior("k", Behavior{Hold: hold, MaxInFlight: 2}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	statuses := make(chan int, 2)
	for range 2 {
		wg.Go(func() {
			resp, err := ts.do(t.Context(), t, call{path: "/v1/chat/completions", key: "k", body: chatBody("m", false)})
			if err != nil {
				statuses <- 0
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	if err := ts.WaitInFlight(waitCtx(t), 2); err != nil {
		t.Fatal(err)
	}
	status, h, body := ts.roundTrip(t, call{path: "/v1/chat/completions", key: "k", body: chatBody("m", false)})
	if status != http.StatusTooManyRequests || !strings.Contains(string(body), "too many concurrent requests") || h.Get("Retry-After") != "" {
		t.Errorf("third request: %d %s (Retry-After %q); want 429 naming concurrency, no Retry-After", status, body, h.Get("Retry-After"))
	}
	status, _, body = ts.roundTrip(t, call{path: "/v1/messages", anth: true, key: "k", body: chatBody("m", false)})
	if status != http.StatusTooManyRequests || !strings.Contains(string(body), `"rate_limit_error"`) {
		t.Errorf("anthropic third request: %d %s", status, body)
	}
	if got := ts.Stats().ByKey["k"].Failures; got != 2 {
		t.Errorf("failures of k = %d, want 2", got)
	}
	if err := ts.SetKeyBehavior("k", Behavior{MaxInFlight: 3}); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := ts.roundTrip(t, call{path: "/v1/chat/completions", key: "k", body: chatBody("m", false)}); status != http.StatusOK {
		t.Errorf("after raising the limit to 3: %d, want 200", status)
	}
	close(hold)
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != http.StatusOK {
			t.Errorf("held request ended %d, want 200", s)
		}
	}
}
