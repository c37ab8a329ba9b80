package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestForbiddenEndpointKeepsConnection (issue 24, finding 3): an upstream
// that answers 403 on /v1/embeddings only (an OpenAI restricted key) cools
// that route and model; chat through the same connection is still served.
// The same route and model answering 403 again is no second scope; a 403 on
// another model within suspendMs suspends the connection.
func TestForbiddenEndpointKeepsConnection(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, withClock(clock))
	var forbidden atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/embeddings") {
			forbidden.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":{"message":"You have insufficient permissions for this operation.","type":"invalid_request_error","code":null}}`))
			return
		}
		e.up.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	c := e.conn("c", "k", "glm-5", "emb-a", "emb-b")
	c.BaseURL = up.URL + "/v1"
	e.gw.Apply(Config{Settings: limits.Settings{BreakerCooldownMs: ptr(30000)}, Connections: []Connection{c}})
	ctx := testCtx(t)
	embed := func(model string) reply {
		return e.post(ctx, "/v1/embeddings", `{"model":"`+model+`","input":"hi"}`)
	}

	if r := embed("emb-a"); r.status != http.StatusForbidden {
		t.Fatalf("embeddings: status %d, want the upstream's 403: %s", r.status, r.body)
	}
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-c")
	if h := e.health("c"); h.Health == live.HealthSuspended {
		t.Fatalf("one 403 on embeddings suspended the connection: %+v", h)
	}
	// The route and model cool for breakerCooldownMs: not sent again; with
	// no other connection serving them, 503 until the cooldown ends.
	if r := embed("emb-a"); r.status != http.StatusServiceUnavailable || r.errorCode(t) != CodeNoHealthy ||
		r.header.Get("Retry-After") != "30" {
		t.Errorf("cooling embeddings: status %d Retry-After %q %s, want 503 %s with Retry-After 30",
			r.status, r.header.Get("Retry-After"), r.body, CodeNoHealthy)
	}
	if n := forbidden.Load(); n != 1 {
		t.Errorf("the upstream saw %d embeddings requests, want 1 (the route cools)", n)
	}
	// After the cooldown the same route and model answering 403 again is
	// still one scope: chat goes on.
	clock.Advance(30 * time.Second)
	if r := embed("emb-a"); r.status != http.StatusForbidden {
		t.Fatalf("embeddings after the cooldown: status %d, want 403", r.status)
	}
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-c")
	// A 403 on a second model within suspendMs suspends the connection.
	if r := embed("emb-b"); r.status != http.StatusForbidden {
		t.Fatalf("embeddings emb-b: status %d, want 403", r.status)
	}
	h := e.health("c")
	if h.Health != live.HealthSuspended || !h.Until.Equal(clock.Now().Add(30*time.Minute)) {
		t.Fatalf("after 403s on two models: health %+v, want suspended for suspendMs", h)
	}
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	if r.status != http.StatusServiceUnavailable || r.errorCode(t) != CodeNoHealthy {
		t.Errorf("chat on the suspended connection: status %d %s, want 503 %s", r.status, r.body, CodeNoHealthy)
	}
}
