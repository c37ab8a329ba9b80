package gateway

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// admissionCap is the cap admission enforces on gate key.
func (e *env) admissionCap(key string) int {
	for _, st := range e.gw.ctrl.Stats() {
		if st.Key == key {
			return st.Cap
		}
	}
	return -1
}

// TestAdaptiveRejectionCutsInsteadOfCooling: on an adaptive connection, a 429
// whose body names concurrency and carries no Retry-After cuts the effective
// cap (pushed to admission) and leaves the connection healthy; one with a
// Retry-After also cools it; a 429 on a connection that is not adaptive
// cools it and learns nothing. The rejected requests fail over.
func TestAdaptiveRejectionCutsInsteadOfCooling(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, withClock(clock))
	a := e.conn("a", "ka", "glm-5")
	a.Priority = 10
	a.Overrides = caps(4, map[string]int{"glm-5": 3}, 0)
	a.Overrides.Adaptive = ptr(true)
	b := e.conn("b", "kb", "glm-5")
	e.gw.Apply(Config{Connections: []Connection{a, b}})
	if got := e.admissionCap("connection:a"); got != 4 {
		t.Fatalf("admission cap before any rejection = %d, want 4", got)
	}
	ctx := testCtx(t)

	// One request held upstream; the account takes one at a time.
	hold := make(chan struct{})
	e.mustBehave("ka", upstreamtest.Behavior{Hold: hold, MaxInFlight: 1})
	var wg sync.WaitGroup
	wg.Go(func() { expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-a") })
	if err := e.up.WaitInFlight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-b")
	if h := e.health("a"); h.Health != live.HealthOK {
		t.Errorf("a health after a concurrency 429 without Retry-After = %q (%s), want ok", h.Health, h.Reason)
	}
	for key, want := range map[string]int{"connection:a": 2, "model:a:glm-5": 2} {
		if c, _ := e.gw.learn.EffectiveCap(key); c != want {
			t.Errorf("effective cap of %s = %d, want %d", key, c, want)
		}
		if got := e.admissionCap(key); got != want {
			t.Errorf("admission cap of %s = %d, want %d", key, got, want)
		}
	}
	if g := e.gate("connection:a"); g.Cap != 4 || g.EffectiveCap != 2 || !g.Adaptive {
		t.Errorf("live view of connection:a: cap %d, effective %d, adaptive %v; want 4, 2, true", g.Cap, g.EffectiveCap, g.Adaptive)
	}
	if g := e.gate("connection:b"); g.EffectiveCap != g.Cap || g.Adaptive {
		t.Errorf("live view of connection:b (not adaptive): cap %d, effective %d, adaptive %v", g.Cap, g.EffectiveCap, g.Adaptive)
	}

	// With a Retry-After the connection also cools.
	clock.Advance(2 * time.Second)
	e.mustBehave("ka", upstreamtest.Behavior{Hold: hold, MaxInFlight: 1, RetryAfter: 3 * time.Second})
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-b")
	if h := e.health("a"); h.Health != live.HealthCooling {
		t.Errorf("a health after a concurrency 429 with Retry-After = %q, want cooling", h.Health)
	}
	if c, _ := e.gw.learn.EffectiveCap("connection:a"); c != 1 {
		t.Errorf("effective cap after the second cut = %d, want 1", c)
	}
	close(hold)
	wg.Wait()

	// Switched off: the configured cap is back in force.
	a.Overrides.Adaptive = nil
	e.gw.Apply(Config{Connections: []Connection{a, b}})
	if _, ok := e.gw.learn.EffectiveCap("connection:a"); ok {
		t.Fatal("connection a is still learned after adaptive was switched off")
	}
	if got := e.admissionCap("connection:a"); got != 4 {
		t.Errorf("admission cap after adaptive was switched off = %d, want the configured 4", got)
	}
}

// TestAdaptiveAndShadowMetrics: gatehouse_gate_effective_capacity is the
// learned cap on an adaptive gate and the cap elsewhere;
// gatehouse_gate_shadow_would_queue_total counts per shadow gate, which is
// in no admission series.
func TestAdaptiveAndShadowMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, withClock(clock), func(o *Options) { o.Registerer = reg })
	a := e.conn("a", "ka", "glm-5")
	a.Priority = 10
	a.Overrides = caps(8, map[string]int{"glm-5": 4}, 0)
	a.Overrides.Adaptive = ptr(true)
	a.Overrides.Shadow = &limits.ShadowCaps{MaxConcurrent: ptr(1)}
	b := e.conn("b", "kb", "glm-5")
	b.Overrides = caps(3, nil, 0)
	e.gw.Apply(Config{Connections: []Connection{a, b}})
	ctx := testCtx(t)
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "503", FailTimes: 1})
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-b")
	hold := make(chan struct{})
	e.mustBehave("ka", upstreamtest.Behavior{Hold: hold})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-a") })
	}
	if err := e.up.WaitInFlight(ctx, 2); err != nil {
		t.Fatal(err)
	}
	close(hold)
	wg.Wait()
	for _, tc := range []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"gatehouse_gate_effective_capacity", map[string]string{"key": "connection:a", "level": "connection"}, 5},
		{"gatehouse_gate_effective_capacity", map[string]string{"key": "model:a:glm-5", "level": "model"}, 2},
		{"gatehouse_gate_capacity", map[string]string{"key": "connection:a"}, 8},
		{"gatehouse_gate_effective_capacity", map[string]string{"key": "connection:b"}, 3},
		{"gatehouse_gate_shadow_would_queue_total", map[string]string{"key": "shadow:connection:a"}, 1},
	} {
		got, ok := metricValue(t, reg, tc.metric, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.metric, tc.labels, got, ok, tc.want)
		}
	}
	if _, ok := metricValue(t, reg, "gatehouse_gate_inflight", map[string]string{"key": "shadow:connection:a"}); ok {
		t.Error("a shadow gate shows in gatehouse_gate_inflight")
	}
}
