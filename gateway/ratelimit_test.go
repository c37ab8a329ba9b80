package gateway

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// expectRateLimited asserts a 429 with code, gate and Retry-After.
func expectRateLimited(t *testing.T, r reply, code, gate string, retryAfter int) {
	t.Helper()
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429: %s", r.status, r.body)
	}
	if got := r.errorCode(t); got != code {
		t.Errorf("code %q, want %q", got, code)
	}
	if got := r.header.Get(HeaderGate); got != gate {
		t.Errorf("%s = %q, want %q", HeaderGate, got, gate)
	}
	if retryAfter > 0 {
		if got := r.header.Get("Retry-After"); got != strconv.Itoa(retryAfter) {
			t.Errorf("Retry-After = %q, want %d", got, retryAfter)
		}
	}
}

// postAll sends n chat requests at once and returns the replies.
func (e *env) postAll(ctx context.Context, n int, model string) []reply {
	out := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = e.post(ctx, "/v1/chat/completions", chatBody(model, false)) })
	}
	wg.Wait()
	return out
}

func TestRPMSpacesDispatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{RPM: ptr(60), MaxWaitMs: ptr(10000)} // one a second
	e.gw.Apply(Config{Connections: []Connection{c}})

	// Anchored before any dispatch: the first turn is taken no earlier than
	// sent and turn i comes i seconds after it, so arrival i (sorted) is at
	// least i seconds after sent however late the loopback delivers any of
	// them, and a loaded machine can only make the gaps longer. Without
	// spacing all five arrive within a few ms of sent.
	sent := time.Now()
	for i, r := range e.postAll(testCtx(t), 5, "glm-5") {
		if r.status != http.StatusOK {
			t.Errorf("request %d: status %d, want 200: %s", i, r.status, r.body)
		}
	}
	arr := e.up.Arrivals("k1", "glm-5")
	if len(arr) != 5 {
		t.Fatalf("upstream saw %d requests, want 5", len(arr))
	}
	slices.SortFunc(arr, time.Time.Compare)
	for i, at := range arr {
		since := at.Sub(sent)
		t.Logf("request %d arrived %s after the requests were sent", i+1, since.Round(time.Millisecond))
		// The millisecond covers the limiter's float arithmetic.
		if want := time.Duration(i)*time.Second - time.Millisecond; since < want {
			t.Errorf("request %d arrived %s after the requests were sent, want ≥ %s (rpm 60 spaces dispatches 1s apart)", i+1, since, want)
		}
	}
}

func TestSpacingShortWaitRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		override limits.Overrides
		gate     string
	}{
		{name: "rpm", override: limits.Overrides{RPM: ptr(60)}, gate: "rpm:c1"},
		{name: "minTime", override: limits.Overrides{MinTimeMs: ptr(1000)}, gate: "minTime:c1"},
		{name: "minTime stricter than rpm", override: limits.Overrides{RPM: ptr(600), MinTimeMs: ptr(1000)}, gate: "minTime:c1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, upstreamtest.Options{})
			c := e.conn("c1", "k1", "glm-5")
			c.Overrides = tc.override
			c.Overrides.MaxWaitMs = ptr(100)
			e.gw.Apply(Config{Connections: []Connection{c}})

			ok := 0
			for _, r := range e.postAll(testCtx(t), 3, "glm-5") {
				if r.status == http.StatusOK {
					ok++
					continue
				}
				expectRateLimited(t, r, CodeRateLimitRPM, tc.gate, 1)
			}
			if ok != 1 {
				t.Errorf("%d requests served, want 1 (the others' turns are ~1s away, past maxWait 100ms)", ok)
			}
			if got := e.up.Requests("k1", "glm-5"); got != 1 {
				t.Errorf("upstream saw %d requests, want 1", got)
			}
			if !e.allGatesIdle() {
				t.Error("a permit is still held after the rejections")
			}
		})
	}
}

func TestConcurrencyAndSpacingShareOneDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	c := e.conn("c1", "k1", "glm-5")
	// Cap 1, a dispatch every 1500 ms, 1000 ms to wait in all. The first
	// request holds the permit for 500 ms; the second gets it then, and its
	// turn comes 1500 ms after the first's dispatch, so at most 1000 ms after
	// its permit. Each wait fits in 1000 ms (the turn one whatever the
	// permit's delay), both together do not: with separate deadlines it is
	// served, with one it is refused as soon as it holds the permit. (The
	// second request's own arrival may lag the first's dispatch by up to
	// 500 ms, and the permit come 500 ms late, before the outcome changes.)
	c.Overrides = limits.Overrides{MaxConcurrent: ptr(1), RPM: ptr(40), MaxWaitMs: ptr(1000)}
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	// The X-Mock-* headers never pass the gateway (the header allowlist):
	// the latency is set for the connection's key instead. The second
	// request never reaches the upstream.
	if err := e.up.SetKeyBehavior("k1", upstreamtest.Behavior{Latency: 500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	first := make(chan reply, 1)
	go func() {
		first <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	}()
	if err := e.up.WaitInFlight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	expectRateLimited(t, r, CodeRateLimitRPM, "rpm:c1", 0)
	// It was refused after waiting for the permit, not before: the gate
	// admitted it (after a wait), and its answer says it queued.
	t.Logf("refused after queueing %s ms", r.header.Get(HeaderQueueMs))
	if ms, err := strconv.Atoi(r.header.Get(HeaderQueueMs)); err != nil || ms < 1 {
		t.Errorf("%s = %q, want the milliseconds it waited for the permit", HeaderQueueMs, r.header.Get(HeaderQueueMs))
	}
	g := e.gate("connection:c1")
	if waited := g.Waits.Count() - g.Waits[0]; g.Admitted != 2 || waited != 1 || g.Timeouts != 0 {
		t.Errorf("connection:c1 admitted %d (%d after a wait), timeouts %d; want 2 (1), 0: the turn is checked once the permit is held",
			g.Admitted, waited, g.Timeouts)
	}
	if fr := <-first; fr.status != http.StatusOK {
		t.Errorf("first request: status %d", fr.status)
	}
	if got := e.up.Requests("k1", "glm-5"); got != 1 {
		t.Errorf("upstream saw %d requests, want 1", got)
	}
	waitFor(t, 2*time.Second, "gates idle", e.allGatesIdle)
}

func TestTPMWindow(t *testing.T) {
	t.Parallel()
	clock := newFakeClock() // 03:04:05
	e := newEnv(t, upstreamtest.Options{UsageTokens: 60}, withClock(clock))
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{TPM: ptr[int64](100)}
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-c1")
	// 60 used, and the next request is expected to take about as much.
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	expectRateLimited(t, r, CodeRateLimitTPM, "tpm:c1", 55)
	want := live.Budget{Limit: 100, Remaining: 40, ResetAt: time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)}
	if diff := cmp.Diff(want, e.health("c1").Budgets[live.BudgetTPM]); diff != "" {
		t.Errorf("tpm budget mismatch (-want +got):\n%s", diff)
	}

	clock.Advance(time.Minute)
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-c1")
}

func TestTPMDebtCarriesOver(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{UsageTokens: 250}, withClock(clock))
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{TPM: ptr[int64](100)}
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	// An empty window always lets one request through; this one overdraws it.
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-c1")
	if got := e.health("c1").Budgets[live.BudgetTPM].Remaining; got != -150 {
		t.Errorf("tpm remaining = %d, want -150 (debt)", got)
	}
	// 150 over: paid off after two more minutes.
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	expectRateLimited(t, r, CodeRateLimitTPM, "tpm:c1", ceilSeconds(3*time.Minute-5*time.Second))
	clock.Advance(time.Minute)
	expectRateLimited(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), CodeRateLimitTPM, "tpm:c1", 0)
	clock.Advance(2 * time.Minute)
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-c1")
}

func TestRateLimitsApplyLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{RPM: ptr(1), MaxWaitMs: ptr(100)}
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)
	post := func() reply { return e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) }

	expectVia(t, post(), "conn-c1")
	expectRateLimited(t, post(), CodeRateLimitRPM, "rpm:c1", 60)

	// Keeping the same spacing keeps the limiter: still no turn.
	c.Priority = 1
	e.gw.Apply(Config{Connections: []Connection{c}})
	expectRateLimited(t, post(), CodeRateLimitRPM, "rpm:c1", 0)

	// rpm removed, rpd 1 set: served at once, then out of budget.
	c.Overrides = limits.Overrides{RPD: ptr(1), MaxWaitMs: ptr(100)}
	e.gw.Apply(Config{Connections: []Connection{c}})
	expectVia(t, post(), "conn-c1")
	expectRateLimited(t, post(), CodeRateLimitRPD, "rpd:c1", 0)
}

func TestBudgetsInSnapshotAndMetrics(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	reg := prometheus.NewRegistry()
	e := newEnv(t, upstreamtest.Options{UsageTokens: 60}, withClock(clock), withUsage(newFakeUsage()),
		func(o *Options) { o.Registerer = reg })
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{RPM: ptr(6000), RPD: ptr(10), TPM: ptr[int64](1000), TPD: ptr[int64](5000)}
	c.Priority = 10
	plain := e.conn("c2", "k2", "glm-5")
	e.gw.Apply(Config{Connections: []Connection{c, plain}})
	expectVia(t, e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false)), "conn-c1")

	next := time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)
	midnight := time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
	want := map[string]live.Budget{
		live.BudgetRPM: {Limit: 6000, Remaining: 5999, ResetAt: next},
		live.BudgetRPD: {Limit: 10, Remaining: 9, ResetAt: midnight},
		live.BudgetTPM: {Limit: 1000, Remaining: 940, ResetAt: next},
		live.BudgetTPD: {Limit: 5000, Remaining: 4940, ResetAt: midnight},
	}
	if diff := cmp.Diff(want, e.health("c1").Budgets); diff != "" {
		t.Errorf("c1 budgets mismatch (-want +got):\n%s", diff)
	}
	if b := e.health("c2").Budgets; b != nil {
		t.Errorf("c2 has no limits but budgets %v", b)
	}
	for name, b := range want {
		got, ok := metricValue(t, reg, "gatehouse_ratelimit_remaining", map[string]string{"connection": "conn-c1", "limit": name})
		if !ok {
			t.Errorf("no gatehouse_ratelimit_remaining for %s", name)
			continue
		}
		if got != float64(b.Remaining) {
			t.Errorf("gatehouse_ratelimit_remaining{limit=%q} = %v, want %d", name, got, b.Remaining)
		}
	}
	if _, ok := metricValue(t, reg, "gatehouse_ratelimit_remaining", map[string]string{"connection": "conn-c2"}); ok {
		t.Error("gatehouse_ratelimit_remaining reported for a connection without limits")
	}
}
