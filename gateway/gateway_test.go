package gateway

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

func TestCapsHoldEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 15 * time.Millisecond})
	c := e.conn("c1", "key-c1", "glm-5", "glm-4.7")
	c.Overrides = caps(4, map[string]int{"glm-5": 1, "glm-4.7": 3}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	var wg sync.WaitGroup
	statuses := make([]int, 50)
	for i := range 50 {
		model := "glm-5"
		if i%2 == 1 {
			model = "glm-4.7"
		}
		wg.Go(func() { statuses[i] = e.post(ctx, "/v1/chat/completions", chatBody(model, false)).status })
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("request %d: status %d, want 200", i, s)
		}
	}
	st := e.up.Stats()
	if got := e.up.Peak("key-c1", "glm-5"); got != 1 {
		t.Errorf("upstream peak for glm-5 = %d, want 1", got)
	}
	if got := e.up.Peak("key-c1", "glm-4.7"); got < 1 || got > 3 {
		t.Errorf("upstream peak for glm-4.7 = %d, want 1..3", got)
	}
	if got := st.ByKey["key-c1"].Peak; got > 4 {
		t.Errorf("upstream peak for the connection = %d, want <= 4", got)
	}
	waitFor(t, time.Second, "all gates idle", e.allGatesIdle)
}

func TestShortWaitRejectsExcessWithModelGate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 400 * time.Millisecond})
	c := e.conn("c1", "key-c1", "glm-5")
	c.Overrides = caps(4, map[string]int{"glm-5": 1}, 30)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	var wg sync.WaitGroup
	replies := make([]reply, 8)
	for i := range replies {
		wg.Go(func() { replies[i] = e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) })
	}
	wg.Wait()
	var ok, rejected int
	for _, r := range replies {
		switch r.status {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			rejected++
			if code := r.errorCode(t); code != "SEMAPHORE_TIMEOUT" {
				t.Errorf("429 code = %q, want SEMAPHORE_TIMEOUT", code)
			}
			if got, want := r.header.Get(HeaderGate), "model:c1:glm-5"; got != want {
				t.Errorf("%s = %q, want %q", HeaderGate, got, want)
			}
			if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 {
				t.Errorf("Retry-After = %q, want whole seconds >= 1", r.header.Get("Retry-After"))
			}
		default:
			t.Errorf("unexpected status %d: %s", r.status, r.body)
		}
	}
	if ok != 1 || rejected != 7 {
		t.Errorf("got %d ok and %d rejected, want 1 and 7", ok, rejected)
	}
	if got := e.up.Peak("key-c1", "glm-5"); got != 1 {
		t.Errorf("upstream peak = %d, want 1", got)
	}
}

func TestApplyChangesCapsLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 250 * time.Millisecond})
	c := e.conn("c1", "key-c1", "glm-5")
	c.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)
	gateKey := "model:c1:glm-5"

	// Raise 1 → 3 while five requests wait.
	statuses := make([]int, 6)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() { statuses[i] = e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)).status })
	}
	waitFor(t, 5*time.Second, "one in flight, five queued", func() bool {
		g := e.gate(gateKey)
		return g.InFlight == 1 && g.Queued == 5
	})
	c.Overrides.ModelConcurrency = map[string]int{"glm-5": 3}
	e.gw.Apply(Config{Connections: []Connection{c}})
	if err := e.up.WaitUntil(ctx, func(st upstreamtest.Stats) bool { return st.ByModel["glm-5"].InFlight == 3 }); err != nil {
		t.Fatalf("upstream never reached 3 in flight after raising the cap: %v", err)
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("request %d: status %d", i, s)
		}
	}
	if got := e.up.Peak("key-c1", "glm-5"); got != 3 {
		t.Errorf("peak after raising = %d, want 3", got)
	}

	// Lower 3 → 1 while three run and three wait: in-flight may only fall
	// until below the new cap, then never rise above 1.
	e.up.Reset()
	for i := range statuses {
		wg.Go(func() { statuses[i] = e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)).status })
	}
	waitFor(t, 5*time.Second, "three in flight, three queued", func() bool {
		g := e.gate(gateKey)
		return g.InFlight == 3 && g.Queued == 3
	})
	if err := e.up.WaitUntil(ctx, func(st upstreamtest.Stats) bool { return st.ByModel["glm-5"].InFlight == 3 }); err != nil {
		t.Fatalf("three admitted requests never reached the upstream: %v", err)
	}
	c.Overrides.ModelConcurrency = map[string]int{"glm-5": 1}
	e.gw.Apply(Config{Connections: []Connection{c}})
	prev, worst := 3, 0
	err := e.up.WaitUntil(ctx, func(st upstreamtest.Stats) bool {
		cur := st.ByModel["glm-5"].InFlight
		if cur > prev && cur > worst {
			worst = cur
		}
		prev = cur
		return st.ByModel["glm-5"].Requests == 6 && cur == 0
	})
	if err != nil {
		t.Fatalf("waiting for the queue to drain: %v", err)
	}
	wg.Wait()
	if worst > 1 {
		t.Errorf("after lowering the cap to 1, upstream in-flight rose to %d", worst)
	}
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("request %d after lowering: status %d", i, s)
		}
	}
}

func TestExecutionBoundBeforeHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 5 * time.Second})
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{ExecutionMaxWaitMs: ptr(150), ModelConcurrency: map[string]int{"glm-5": 1}}
	e.gw.Apply(Config{Connections: []Connection{c}})
	for _, stream := range []bool{false, true} {
		r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", stream))
		if r.status != http.StatusGatewayTimeout {
			t.Fatalf("stream=%v: status %d, want 504: %s", stream, r.status, r.body)
		}
		checkShape(t, r, "openai", CodeExecutionTimeout)
		waitFor(t, time.Second, "permit released", func() bool { return e.gate("model:c1:glm-5").InFlight == 0 })
	}
}

func TestContextCancelledWhileQueuedLeavesQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 300 * time.Millisecond})
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	cancel, release, first, queued := e.holdAndQueue(t)
	cancel()
	waitFor(t, 10*time.Second, "queue empty after cancel", func() bool { return e.gate("model:c1:glm-5").Queued == 0 })
	<-queued
	release()
	<-first
	if got := e.up.Requests("k1", "glm-5"); got != 1 {
		t.Errorf("upstream got %d requests, want 1 (the cancelled one never dispatched)", got)
	}
}

// holdAndQueue sends a glm-5 request that takes the only slot of model:c1:glm-5 and,
// once it is in flight, a second one that queues behind it. The upstream holds every
// request of k1 until release is called, so the first cannot end (and let the second
// in) before the caller says so, however slow the machine. cancel makes the queued
// request's client leave; first and queued close when each request has ended.
func (e *env) holdAndQueue(t *testing.T) (cancel context.CancelFunc, release func(), first, queued <-chan struct{}) {
	t.Helper()
	hold := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	e.mustBehave("k1", upstreamtest.Behavior{Hold: hold})
	ctx := testCtx(t)
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	}()
	waitFor(t, 10*time.Second, "first in flight", func() bool { return e.gate("model:c1:glm-5").InFlight == 1 })
	qctx, cancel := context.WithCancel(ctx)
	queuedDone := make(chan struct{})
	go func() {
		defer close(queuedDone)
		req, _ := http.NewRequestWithContext(qctx, http.MethodPost, e.gwURL+"/v1/chat/completions", strings.NewReader(chatBody("glm-5", false)))
		req.Header.Set("Authorization", "Bearer "+testClientKey)
		if resp, err := e.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, 10*time.Second, "second queued", func() bool { return e.gate("model:c1:glm-5").Queued == 1 })
	return cancel, release, firstDone, queuedDone
}

func TestEqualPrioritiesShareLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	hi := e.conn("hi", "k-hi", "glm-5")
	hi.Priority, hi.Enabled = 5, false
	var conns []Connection
	for _, id := range []string{"x", "y", "z"} {
		conns = append(conns, e.conn(id, "k-"+id, "glm-5"))
	}
	e.gw.Apply(Config{Connections: append(conns, hi)})
	ctx := testCtx(t)
	for range 30 {
		if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)); r.status != http.StatusOK {
			t.Fatalf("status %d", r.status)
		}
	}
	got := map[string]int64{}
	for _, id := range []string{"x", "y", "z", "hi"} {
		got[id] = e.up.Requests("k-"+id, "glm-5")
	}
	if diff := cmp.Diff(map[string]int64{"x": 10, "y": 10, "z": 10, "hi": 0}, got); diff != "" {
		t.Errorf("requests per connection mismatch (-want +got):\n%s", diff)
	}
}

// An uncapped connection's gate keeps its counters (and wait histogram, the overview's
// p50/p99) across config reloads, like a capped one.
func TestUncappedGateCountersSurviveApply(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	cfg := Config{Connections: []Connection{e.conn("c1", "k1", "glm-5")}}
	e.gw.Apply(cfg)
	for range 2 {
		if r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false)); r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	e.gw.Apply(cfg)
	if g := e.gate("connection:c1"); g.Admitted != 2 || g.Waits.Count() != 2 {
		t.Errorf("connection:c1 after a reload: admitted %d, waits counted %d; want 2 and 2", g.Admitted, g.Waits.Count())
	}
}
