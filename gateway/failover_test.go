package gateway

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// pair configures connections a (priority 10) and b (priority 0), both
// serving glm-5, with the given settings.
func (e *env) pair(settings limits.Settings) (a, b Connection) {
	a = e.conn("a", "ka", "glm-5")
	a.Priority = 10
	b = e.conn("b", "kb", "glm-5")
	e.gw.Apply(Config{Settings: settings, Connections: []Connection{a, b}})
	return a, b
}

func (e *env) mustBehave(key string, b upstreamtest.Behavior) {
	e.t.Helper()
	if err := e.up.SetKeyBehavior(key, b); err != nil {
		e.t.Fatal(err)
	}
}

// expectVia asserts a successful answer from the named connection.
func expectVia(t *testing.T, r reply, conn string) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", r.status, r.body)
	}
	if got := r.header.Get(HeaderConnection); got != conn {
		t.Fatalf("served by %q, want %q", got, conn)
	}
}

func TestFailover429CoolsDownThenReturns(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, withClock(clock))
	e.pair(limits.Settings{})
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "429", RetryAfter: 2 * time.Second, FailTimes: 1})
	ctx := testCtx(t)

	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-b")
	if got := e.up.Requests("ka", "glm-5"); got != 1 {
		t.Fatalf("a got %d requests, want 1", got)
	}
	h := e.health("a")
	if h.Health != live.HealthCooling || !h.Until.Equal(clock.Now().Add(2*time.Second)) {
		t.Errorf("a health = %+v, want cooling until now+2s", h)
	}
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-b")
	if got := e.up.Requests("ka", "glm-5"); got != 1 {
		t.Errorf("a was tried while cooling (%d requests)", got)
	}
	clock.Advance(2 * time.Second)
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-a")
	if h := e.health("a"); h.Health != live.HealthOK {
		t.Errorf("a health after success = %q, want ok", h.Health)
	}
}

func TestFailoverAllCooling(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, withClock(clock))
	e.pair(limits.Settings{})
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "429", RetryAfter: 5 * time.Second})
	e.mustBehave("kb", upstreamtest.Behavior{Fail: "429", RetryAfter: 2 * time.Second})
	ctx := testCtx(t)
	for i := range 2 {
		r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
		if r.status != http.StatusTooManyRequests {
			t.Fatalf("request %d: status %d, want 429", i, r.status)
		}
		checkShape(t, r, "openai", CodeUpstreamCooldown)
		if got := r.header.Get("Retry-After"); got != "2" {
			t.Errorf("request %d: Retry-After %q, want 2 (the shorter cooldown)", i, got)
		}
		if got := r.header.Get(HeaderGate); got != "cooldown:b:glm-5" {
			t.Errorf("request %d: gate %q, want cooldown:b:glm-5", i, got)
		}
	}
	if n := e.up.Stats().Total.Requests; n != 2 {
		t.Errorf("upstream got %d requests, want 2 (the second client request tried nobody)", n)
	}
}

func TestFailover401SuspendsUntilReset(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, withClock(clock))
	e.pair(limits.Settings{})
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "401"})
	ctx := testCtx(t)

	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-b")
	h := e.health("a")
	if h.Health != live.HealthSuspended || !h.Until.Equal(clock.Now().Add(30*time.Minute)) {
		t.Errorf("a health = %+v, want suspended for 30m", h)
	}
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-b")
	if got := e.up.Requests("ka", "glm-5"); got != 1 {
		t.Errorf("suspended a was tried again (%d requests)", got)
	}
	e.up.ClearBehaviors()
	if !e.gw.ResetHealth(t.Context(), "a") {
		t.Fatal("ResetHealth(a) = false")
	}
	if e.gw.ResetHealth(t.Context(), "nope") {
		t.Error("ResetHealth of an unknown connection = true")
	}
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-a")
}

func TestFailoverBreakerOpensProbesAndCloses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	e.pair(limits.Settings{BreakerFailures: ptr(5), BreakerCooldownMs: ptr(1000)})
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "500", FailTimes: 5})
	ctx := testCtx(t)
	for range 5 {
		expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-b")
	}
	if h := e.health("a"); h.Health != live.HealthBreakerOpen || h.Until.IsZero() {
		t.Fatalf("a health = %+v, want breaker-open with an end", h)
	}
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-b")
	if got := e.up.Requests("ka", "glm-5"); got != 5 {
		t.Fatalf("a got %d requests with its breaker open, want 5", got)
	}
	waitFor(t, 3*time.Second, "breaker half-open", func() bool { return e.health("a").Health == live.HealthHalfOpen })

	// Half-open: of four concurrent requests exactly one probes a. The probe is held
	// at the upstream until the other three have been answered (by b), so none of
	// them can arrive after the probe ends, however slow the machine.
	hold := make(chan struct{})
	e.mustBehave("ka", upstreamtest.Behavior{Hold: hold})
	viaB := e.up.Requests("kb", "glm-5")
	var wg sync.WaitGroup
	replies := make([]reply, 4)
	for i := range replies {
		wg.Go(func() { replies[i] = e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) })
	}
	waitFor(t, 5*time.Second, "one probe at a, three answered by b", func() bool {
		return e.up.Requests("ka", "glm-5") == 6 && e.up.Requests("kb", "glm-5") == viaB+3
	})
	close(hold)
	wg.Wait()
	viaA := 0
	for _, r := range replies {
		if r.status != http.StatusOK {
			t.Errorf("status %d during probe", r.status)
		}
		if r.header.Get(HeaderConnection) == "conn-a" {
			viaA++
		}
	}
	if viaA != 1 {
		t.Errorf("%d requests went to a while half-open, want exactly 1 probe", viaA)
	}
	if h := e.health("a"); h.Health != live.HealthOK {
		t.Errorf("a health after a good probe = %q, want ok", h.Health)
	}
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-a")
}

func TestFailover400GoesBackUnchanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	e.pair(limits.Settings{})
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "400"})
	r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false))
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "injected failure 400") {
		t.Fatalf("got %d %q, want the upstream's 400 body", r.status, r.body)
	}
	if n := e.up.Requests("kb", "glm-5"); n != 0 {
		t.Errorf("b got %d requests after a's 400", n)
	}
	if h := e.health("a"); h.Health != live.HealthOK {
		t.Errorf("a health = %q after a 400, want ok", h.Health)
	}
}

func TestFailoverAllFailingReturnsLastUpstream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	e.pair(limits.Settings{})
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "500"})
	e.mustBehave("kb", upstreamtest.Behavior{Fail: "503"})
	r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false))
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "injected failure 503") {
		t.Fatalf("got %d %q, want b's 503", r.status, r.body)
	}
	if got := r.header.Get(HeaderConnection); got != "conn-b" {
		t.Errorf("%s = %q, want conn-b", HeaderConnection, got)
	}
}

func TestFailoverSaturatedGateSpillsOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	a := e.conn("a", "ka", "glm-5")
	a.Priority = 10
	a.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
	b := e.conn("b", "kb", "glm-5")
	e.gw.Apply(Config{Connections: []Connection{a, b}})
	e.mustBehave("ka", upstreamtest.Behavior{Latency: 400 * time.Millisecond})
	ctx := testCtx(t)
	first := make(chan reply, 1)
	go func() { first <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) }()
	if err := e.up.WaitUntil(ctx, func(st upstreamtest.Stats) bool { return st.ByKey["ka"].InFlight == 1 }); err != nil {
		t.Fatal(err)
	}
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	expectVia(t, r, "conn-b")
	if got := r.header.Get(HeaderQueueMs); got != "0" {
		t.Errorf("%s = %q, want 0 (no queueing with b free)", HeaderQueueMs, got)
	}
	expectVia(t, <-first, "conn-a")
	if h := e.health("a"); h.Health != live.HealthOK {
		t.Errorf("a health = %q, want ok: a saturated gate is not a failure", h.Health)
	}
}

func TestFailoverStormLeavesGatesIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 2 * time.Millisecond})
	var conns []Connection
	fails := map[string]upstreamtest.Behavior{
		"k0": {Fail: "500"},
		"k1": {Fail: "429", RetryAfter: time.Second},
		"k2": {Fail: upstreamtest.FailReset},
		"k3": {Fail: upstreamtest.FailHang},
		"k4": {Fail: "401"},
		"k5": {Latency: 10 * time.Millisecond},
		"k6": {Fail: upstreamtest.FailStreamCut},
	}
	for i := range 7 {
		id := string(rune('a' + i))
		key := "k" + string(rune('0'+i))
		c := e.conn(id, key, "glm-5", "glm-4.7")
		c.Overrides = limits.Overrides{
			MaxConcurrent: ptr(3), ModelConcurrency: map[string]int{"glm-5": 2},
			MaxWaitMs: ptr(2000), ExecutionMaxWaitMs: ptr(300),
		}
		conns = append(conns, c)
		e.mustBehave(key, fails[key])
	}
	e.gw.Apply(Config{Settings: limits.Settings{MaxAttempts: ptr(3), BreakerFailures: ptr(2)}, Connections: conns})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for i := range 80 {
		model := []string{"glm-5", "glm-4.7", "zai/glm-5"}[i%3]
		wg.Go(func() {
			r := e.post(ctx, "/v1/chat/completions", chatBody(model, i%2 == 0))
			switch r.status {
			case 200, 401, 429, 500, 502, 503, 504:
			default:
				t.Errorf("unexpected status %d: %s", r.status, r.body)
			}
		})
	}
	wg.Wait()
	waitFor(t, 2*time.Second, "every gate back at 0 in flight", e.allGatesIdle)
	if err := e.up.WaitInFlight(ctx, 0); err != nil {
		t.Error(err)
	}
}

func TestFailoverNoHealthyConnection(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, withClock(clock))
	e.pair(limits.Settings{SuspendMs: ptr(60000)})
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "401"})
	e.mustBehave("kb", upstreamtest.Behavior{Fail: "403"})
	ctx := testCtx(t)
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	if r.status != http.StatusForbidden {
		t.Fatalf("first request: status %d, want b's 403 (the last upstream answer)", r.status)
	}
	clock.Advance(10 * time.Second)
	r = e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("second request: status %d, want 503", r.status)
	}
	checkShape(t, r, "openai", CodeNoHealthy)
	// a is suspended for suspendMs (60 s) after its 401; b's 403 cools
	// only glm-5's chat route, for breakerCooldownMs (30 s).
	if got := r.header.Get("Retry-After"); got != "20" {
		t.Errorf("Retry-After %q, want 20 (until b's 403 cooldown ends)", got)
	}
}

// TestFailoverHalfOpenProbeInFlight checks that while a half-open breaker's
// single probe is in flight, a request with no other candidate gets 503
// NO_HEALTHY_CONNECTION (DESIGN: breaker open → 503), not a 502 claiming
// that no upstream answered when none was tried.
func TestFailoverHalfOpenProbeInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	a := e.conn("a", "ka", "glm-5")
	e.gw.Apply(Config{Settings: limits.Settings{BreakerFailures: ptr(2), BreakerCooldownMs: ptr(1000)}, Connections: []Connection{a}})
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "500", FailTimes: 2})
	ctx := testCtx(t)
	for range 2 {
		if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)); r.status != http.StatusInternalServerError {
			t.Fatalf("status %d, want the upstream's 500", r.status)
		}
	}
	waitFor(t, 3*time.Second, "breaker half-open", func() bool { return e.health("a").Health == live.HealthHalfOpen })

	hold := make(chan struct{})
	e.mustBehave("ka", upstreamtest.Behavior{Hold: hold})
	probe := make(chan reply, 1)
	go func() { probe <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) }()
	if err := e.up.WaitUntil(ctx, func(st upstreamtest.Stats) bool { return st.ByKey["ka"].InFlight == 1 }); err != nil {
		t.Fatal(err)
	}
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	close(hold)
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("during the probe: status %d %s, want 503", r.status, r.body)
	}
	checkShape(t, r, "openai", CodeNoHealthy)
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	expectVia(t, <-probe, "conn-a")
	if got := e.up.Requests("ka", "glm-5"); got != 3 {
		t.Errorf("a got %d requests, want 3 (two failures and one probe)", got)
	}
}
