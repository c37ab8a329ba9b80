package gateway

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// A request that waited in a queue and was then turned away still says how
// long it waited (X-Gatehouse-Queue-Ms), like every answer after routing.
func TestQueueMsOnAdmissionTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	hold := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(1, nil, 100)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	first := make(chan reply, 1)
	go func() { first <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) }()
	waitFor(t, 2*time.Second, "first request in flight", func() bool { return e.gate("connection:c1").InFlight == 1 })

	tests := []struct {
		name, path, body, shape string
	}{
		{name: "openai", path: "/v1/chat/completions", body: chatBody("glm-5", false), shape: "openai"},
		{name: "openai stream", path: "/v1/chat/completions", body: chatBody("zai/glm-5", true), shape: "openai"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(ctx, tc.path, tc.body)
			if r.status != http.StatusTooManyRequests {
				t.Fatalf("status %d, want 429: %s", r.status, r.body)
			}
			checkShape(t, r, tc.shape, "SEMAPHORE_TIMEOUT")
			ms, err := strconv.Atoi(r.header.Get(HeaderQueueMs))
			if err != nil || ms < 1 {
				t.Errorf("%s = %q, want the milliseconds waited", HeaderQueueMs, r.header.Get(HeaderQueueMs))
			}
		})
	}
	close(hold)
	if r := <-first; r.status != http.StatusOK {
		t.Errorf("first request: %d %s", r.status, r.body)
	}
}
