package gateway

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestDrainAnswersQueuedAtOnce: Drain answers every queued request 503
// SHUTTING_DOWN with Retry-After 1 at once, in both error shapes, while the
// request in flight finishes with 200; a request after Drain gets the same 503.
func TestDrainAnswersQueuedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	hold := make(chan struct{})
	e.mustBehave("k1", upstreamtest.Behavior{Hold: hold})
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(1, nil, 600000)
	an := e.conn("c2", "k1", "claude-x")
	an.APIStyle = "anthropic"
	an.Overrides = caps(1, nil, 600000)
	e.gw.Apply(Config{Connections: []Connection{c, an}})
	ctx := testCtx(t)

	inflight := make(chan reply, 1)
	go func() { inflight <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) }()
	waitFor(t, 5*time.Second, "one in flight", func() bool { return e.gate("connection:c1").InFlight == 1 })
	anthropicBody := `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	inflightAn := make(chan reply, 1)
	go func() { inflightAn <- e.post(ctx, "/v1/messages", anthropicBody) }()
	waitFor(t, 5*time.Second, "the anthropic one in flight", func() bool { return e.gate("connection:c2").InFlight == 1 })

	const queued = 10
	type answered struct {
		reply
		anthropic bool
	}
	replies := make(chan answered, 2*queued)
	var wg sync.WaitGroup
	for range queued {
		wg.Go(func() { replies <- answered{e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), false} })
		wg.Go(func() { replies <- answered{e.post(ctx, "/v1/messages", anthropicBody), true} })
	}
	waitFor(t, 5*time.Second, "all queued", func() bool {
		return e.gate("connection:c1").Queued == queued && e.gate("connection:c2").Queued == queued
	})
	e.gw.Drain()
	wg.Wait() // every queued request is answered while the hold is still on
	close(replies)
	n := 0
	for r := range replies {
		n++
		if r.status != http.StatusServiceUnavailable || r.errorCode(t) != CodeShuttingDown || r.header.Get("Retry-After") != "1" {
			t.Errorf("queued request: status %d, Retry-After %q, body %s; want 503 SHUTTING_DOWN, Retry-After 1",
				r.status, r.header.Get("Retry-After"), r.body)
		}
		if strings.HasPrefix(r.body, `{"type":"error"`) != r.anthropic {
			t.Errorf("error shape of %s (anthropic route: %v)", r.body, r.anthropic)
		}
	}
	if n != 2*queued {
		t.Errorf("%d queued requests answered, want %d", n, 2*queued)
	}
	if r := e.post(ctx, "/v1/messages", anthropicBody); r.status != http.StatusServiceUnavailable ||
		r.errorCode(t) != CodeShuttingDown || !strings.HasPrefix(r.body, `{"type":"error"`) {
		t.Errorf("request after Drain: status %d, body %s; want 503 SHUTTING_DOWN in the Anthropic shape", r.status, r.body)
	}
	close(hold)
	if r := <-inflight; r.status != http.StatusOK {
		t.Errorf("in-flight request: status %d, body %s; want 200", r.status, r.body)
	}
	// Waited for too: left running, it would outlive the test and its context.
	if r := <-inflightAn; r.status != http.StatusOK {
		t.Errorf("in-flight Anthropic request: status %d, body %s; want 200", r.status, r.body)
	}
	waitFor(t, 5*time.Second, "every permit released", e.allGatesIdle)
}

// TestShutdownCutEndsStreams: when the server cancels its requests with
// ErrShuttingDown (the shutdown bound ran out), a stream gets an SSE error
// event SHUTTING_DOWN before it ends, and a request the upstream has not
// answered yet gets 503 SHUTTING_DOWN; every permit is released.
func TestShutdownCutEndsStreams(t *testing.T) {
	t.Parallel()
	up := upstreamtest.NewServer(upstreamtest.Options{Chunks: 1000, ChunkInterval: 20 * time.Millisecond})
	upSrv := httptest.NewServer(up)
	gw := New(Options{Outbound: *testOutbound, Authenticate: func(_ context.Context, s string) (ClientKey, bool) {
		return ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
	}})
	base, cut := context.WithCancelCause(context.Background())
	gwSrv := httptest.NewUnstartedServer(gw)
	gwSrv.Config.BaseContext = func(net.Listener) context.Context { return base }
	gwSrv.Start()
	tr := &http.Transport{}
	t.Cleanup(func() {
		cut(nil)
		tr.CloseIdleConnections()
		_ = up.Close()
		gwSrv.Close()
		gw.Close()
		upSrv.Close()
	})
	e := &env{t: t, up: up, upURL: upSrv.URL, gw: gw, gwURL: gwSrv.URL, client: &http.Client{Transport: tr}}
	hold := make(chan struct{})
	defer close(hold)
	e.mustBehave("k-held", upstreamtest.Behavior{Hold: hold})
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5"), e.conn("c2", "k-held", "glm-held")}})
	ctx := testCtx(t)

	resp := e.openStream(ctx, "glm-5")
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatalf("first line of the stream: %v", err)
	}
	held := make(chan reply, 1)
	go func() { held <- e.post(ctx, "/v1/chat/completions", chatBody("glm-held", false)) }()
	waitFor(t, 5*time.Second, "the held request upstream", func() bool { return e.gate("connection:c2").InFlight == 1 })

	cut(ErrShuttingDown)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("reading the stream to its end: %v", err)
	}
	events := strings.Split(strings.TrimSpace(string(rest)), "\n\n")
	if last := events[len(events)-1]; !strings.Contains(last, `"code":"SHUTTING_DOWN"`) {
		t.Errorf("the stream's last event is %q, want an error event SHUTTING_DOWN", last)
	}
	if r := <-held; r.status != http.StatusServiceUnavailable || r.errorCode(t) != CodeShuttingDown {
		t.Errorf("request cut before its answer: status %d, body %s; want 503 SHUTTING_DOWN", r.status, r.body)
	}
	waitFor(t, 5*time.Second, "every permit released", e.allGatesIdle)
}
