package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// bigChat is a chat body of exactly n bytes.
func bigChat(n int) string {
	head, tail := `{"model":"glm-5","messages":[{"role":"user","content":"`, `"}]}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// TestBodyBytesInFlightBound (issue 24, finding 7, bodies): request bodies
// held at once are bounded by MaxBodyBytesInFlight. With the bound full of
// bodies whose requests the upstream holds, more bodies — with a
// Content-Length or chunked — get 503 OVERLOADED with Retry-After: 1
// without being read; once the held requests end, the bytes are given back
// and a body is served again.
func TestBodyBytesInFlightBound(t *testing.T) {
	t.Parallel()
	const size = 1<<20 - 64 // each body reserves size+1 bytes
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.MaxBodyBytesInFlight = 4 << 20 })
	e.gw.Apply(Config{Connections: []Connection{e.conn("c", "k", "glm-5")}})
	hold := make(chan struct{})
	e.mustBehave("k", upstreamtest.Behavior{Hold: hold})
	ctx := testCtx(t)
	body := bigChat(size)

	var wg sync.WaitGroup
	held := make(chan reply, 4)
	for range 4 {
		wg.Go(func() { held <- e.post(ctx, "/v1/chat/completions", body) })
	}
	if err := e.up.WaitInFlight(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if got := e.gw.bodyBytes.InUse(); got != 4*(size+1) {
		t.Errorf("bytes in flight %d, want %d", got, 4*(size+1))
	}
	var extra sync.WaitGroup
	over := make(chan reply, 8)
	for i := range 8 {
		extra.Go(func() {
			if i%2 == 0 {
				over <- e.post(ctx, "/v1/chat/completions", body)
				return
			}
			over <- e.postChunked(ctx, body)
		})
	}
	extra.Wait()
	close(over)
	for r := range over {
		if r.status != http.StatusServiceUnavailable || r.errorCode(t) != CodeOverloaded || r.header.Get("Retry-After") != "1" {
			t.Errorf("body beyond the bound: status %d Retry-After %q %s, want 503 %s with Retry-After 1",
				r.status, r.header.Get("Retry-After"), r.body, CodeOverloaded)
		}
	}
	if got := e.gw.bodyBytes.InUse(); got > 4<<20 {
		t.Errorf("bytes in flight %d, beyond the bound", got)
	}
	if n := e.up.Stats().Total.Requests; n != 4 {
		t.Errorf("the upstream saw %d requests, want the 4 held ones", n)
	}
	close(hold)
	wg.Wait()
	close(held)
	for r := range held {
		if r.status != http.StatusOK {
			t.Errorf("held request: status %d %s, want 200", r.status, r.body)
		}
	}
	waitFor(t, 2*time.Second, "every body's bytes given back", func() bool { return e.gw.bodyBytes.InUse() == 0 })
	if r := e.postChunked(ctx, body); r.status != http.StatusOK {
		t.Errorf("after the bound freed: status %d %s, want 200", r.status, r.body)
	}
	if got := e.gw.bodyBytes.InUse(); got != 0 {
		t.Errorf("bytes in flight %d after every request ended, want 0", got)
	}
}

// postChunked posts body to /v1/chat/completions without a Content-Length.
func (e *env) postChunked(ctx context.Context, body string) reply {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.gwURL+"/v1/chat/completions",
		io.MultiReader(strings.NewReader(body))) // no Len: sent chunked
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testClientKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Errorf("chunked post: %v", err)
		return reply{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}
