package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
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

// fakeUsage is an in-memory UsageCounter. fail, when set, is returned by
// every call.
type fakeUsage struct {
	mu     sync.Mutex
	counts map[string]map[time.Time]DayUsage
	fail   error
	calls  int
}

func newFakeUsage() *fakeUsage { return &fakeUsage{counts: map[string]map[time.Time]DayUsage{}} }

func (f *fakeUsage) entry(id string, day time.Time) DayUsage {
	if f.counts[id] == nil {
		f.counts[id] = map[time.Time]DayUsage{}
	}
	return f.counts[id][utcDay(day)]
}

func (f *fakeUsage) set(id string, day time.Time, u DayUsage) { f.counts[id][utcDay(day)] = u }

func (f *fakeUsage) CountRequest(_ context.Context, id string, day time.Time, limit int64) (int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail != nil {
		return 0, false, f.fail
	}
	u := f.entry(id, day)
	if limit > 0 && u.Requests >= limit {
		return u.Requests, false, nil
	}
	u.Requests++
	f.set(id, day, u)
	return u.Requests, true, nil
}

func (f *fakeUsage) AddUsage(_ context.Context, id string, day time.Time, requests, tokens int64) (DayUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail != nil {
		return DayUsage{}, f.fail
	}
	u := f.entry(id, day)
	u.Requests += requests
	u.Tokens += tokens
	f.set(id, day, u)
	return u, nil
}

func (f *fakeUsage) DayUsage(_ context.Context, day time.Time) (map[string]DayUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail != nil {
		return nil, f.fail
	}
	out := map[string]DayUsage{}
	for id, days := range f.counts {
		if u, ok := days[utcDay(day)]; ok {
			out[id] = u
		}
	}
	return out, nil
}

func (f *fakeUsage) get(id string, day time.Time) DayUsage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.entry(id, day)
}

func (f *fakeUsage) setFail(err error) {
	f.mu.Lock()
	f.fail = err
	f.mu.Unlock()
}

func withUsage(u UsageCounter) envOption { return func(o *Options) { o.Usage = u } }

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

	for i, r := range e.postAll(testCtx(t), 5, "glm-5") {
		if r.status != http.StatusOK {
			t.Errorf("request %d: status %d, want 200: %s", i, r.status, r.body)
		}
	}
	arr := e.up.Arrivals("k1", "glm-5")
	if len(arr) != 5 {
		t.Fatalf("upstream saw %d requests, want 5", len(arr))
	}
	// Dispatches are 1 s apart; arrivals at the upstream add the loopback's
	// jitter, which on a loaded 2-core machine reached 340 ms for one arrival
	// (so a pairwise gap may shrink while the schedule holds). Without spacing
	// all five arrive within a few ms: arrival i is never earlier than i
	// seconds after the first, less the slack.
	for i := 1; i < len(arr); i++ {
		if since := arr[i].Sub(arr[0]); since < time.Duration(i)*time.Second-500*time.Millisecond {
			t.Errorf("request %d arrived %s after the first, want ≥ %s (rpm 60 spaces dispatches 1s apart)",
				i+1, since, time.Duration(i)*time.Second-500*time.Millisecond)
		}
	}
	if span := arr[4].Sub(arr[0]); span < 3700*time.Millisecond {
		t.Errorf("5 requests arrived within %s, want ≥ 3.7s (4 × 1s)", span)
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
	// Cap 1, a dispatch every 800 ms, 600 ms to wait in all. The first
	// request holds the permit for 200 ms; the second gets it then, and its
	// turn would come 600 ms later: each wait fits in 600 ms, both do not.
	// (The margins leave room for a loaded machine's jitter.)
	c.Overrides = limits.Overrides{MaxConcurrent: ptr(1), RPM: ptr(75), MaxWaitMs: ptr(600)}
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	// The X-Mock-* headers never pass the gateway (the header allowlist):
	// the latency is set for the connection's key instead. The second
	// request never reaches the upstream.
	if err := e.up.SetKeyBehavior("k1", upstreamtest.Behavior{Latency: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	first := make(chan reply, 1)
	go func() {
		first <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	}()
	if err := e.up.WaitInFlight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	took := time.Since(start)
	expectRateLimited(t, r, CodeRateLimitRPM, "rpm:c1", 0)
	if took >= 800*time.Millisecond {
		t.Errorf("rejected after %s; separate deadlines would give that, one deadline ends it before 800ms", took)
	}
	if took < 150*time.Millisecond {
		t.Errorf("rejected after %s, before the permit could be had (~200ms)", took)
	}
	if fr := <-first; fr.status != http.StatusOK {
		t.Errorf("first request: status %d", fr.status)
	}
	if got := e.up.Requests("k1", "glm-5"); got != 1 {
		t.Errorf("upstream saw %d requests, want 1", got)
	}
	waitFor(t, 2*time.Second, "gates idle", e.allGatesIdle)
}

// secondsToMidnight is Retry-After for a daily budget at the fake clock's time.
func secondsToMidnight(now time.Time) int {
	return ceilSeconds(utcDay(now).AddDate(0, 0, 1).Sub(now))
}

// restart starts another gateway over the same upstream and options, as a
// restarted process would, and points e at it.
func (e *env) restart(opts ...envOption) {
	e.t.Helper()
	o := Options{Outbound: *testOutbound, Authenticate: func(_ context.Context, s string) (ClientKey, bool) {
		return ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
	}}
	for _, f := range opts {
		f(&o)
	}
	gw := New(o)
	srv := httptest.NewServer(gw)
	e.t.Cleanup(func() {
		srv.Close()
		gw.Close()
	})
	e.gw, e.gwURL = gw, srv.URL
}

func TestRPDCountsPerUTCDayAcrossRestart(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	usage := newFakeUsage()
	opts := []envOption{withClock(clock), withUsage(usage)}
	e := newEnv(t, upstreamtest.Options{}, opts...)
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{RPD: ptr(3)}
	cfg := Config{Connections: []Connection{c}}
	e.gw.Apply(cfg)
	ctx := testCtx(t)

	for range 3 {
		expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-c1")
	}
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	expectRateLimited(t, r, CodeRateLimitRPD, "rpd:c1", secondsToMidnight(clock.Now()))
	if got := usage.get("c1", clock.Now()).Requests; got != 3 {
		t.Errorf("store counts %d requests, want 3 (a local rejection counts nothing)", got)
	}

	e.restart(opts...)
	e.gw.Apply(cfg)
	if err := e.gw.LoadUsage(ctx); err != nil {
		t.Fatalf("LoadUsage: %v", err)
	}
	wantBudget := live.Budget{Limit: 3, Remaining: 0, ResetAt: utcDay(clock.Now()).AddDate(0, 0, 1)}
	if diff := cmp.Diff(wantBudget, e.health("c1").Budgets[live.BudgetRPD]); diff != "" {
		t.Errorf("rpd budget after restart mismatch (-want +got):\n%s", diff)
	}
	r = e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	expectRateLimited(t, r, CodeRateLimitRPD, "rpd:c1", 0)
	if got := e.up.Requests("k1", "glm-5"); got != 3 {
		t.Errorf("upstream saw %d requests, want 3", got)
	}

	clock.Advance(21 * time.Hour) // past midnight UTC
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-c1")
	if got := usage.get("c1", clock.Now()).Requests; got != 1 {
		t.Errorf("store counts %d requests on the new day, want 1", got)
	}
	if got := e.health("c1").Budgets[live.BudgetRPD].Remaining; got != 2 {
		t.Errorf("rpd remaining on the new day = %d, want 2", got)
	}
}

func TestRPDExhaustedFailsOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{}, withUsage(newFakeUsage()))
	a := e.conn("a", "ka", "glm-5")
	a.Priority = 10
	a.Overrides = limits.Overrides{RPD: ptr(1)}
	b := e.conn("b", "kb", "glm-5")
	e.gw.Apply(Config{Connections: []Connection{a, b}})
	ctx := testCtx(t)

	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-a")
	for range 2 {
		expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-b")
	}
	if got := e.up.Requests("ka", "glm-5"); got != 1 {
		t.Errorf("a got %d requests, want 1", got)
	}
}

func TestRPDStoreDeniesAtDispatchFailsOver(t *testing.T) {
	t.Parallel()
	// Another replica used a's last request: memory does not know yet, the
	// store's conditional count says no, and the request moves on to b
	// without spending an attempt or reaching a's upstream.
	clock := newFakeClock()
	usage := newFakeUsage()
	if _, err := usage.AddUsage(t.Context(), "a", clock.Now(), 5, 0); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, upstreamtest.Options{}, withClock(clock), withUsage(usage))
	a := e.conn("a", "ka", "glm-5")
	a.Priority = 10
	a.Overrides = limits.Overrides{RPD: ptr(5)}
	b := e.conn("b", "kb", "glm-5")
	e.gw.Apply(Config{Settings: limits.Settings{MaxAttempts: ptr(1)}, Connections: []Connection{a, b}})

	expectVia(t, e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false)), "conn-b")
	if got := e.up.Requests("ka", "glm-5"); got != 0 {
		t.Errorf("a got %d requests, want 0", got)
	}
	if got := e.health("a").Budgets[live.BudgetRPD].Remaining; got != 0 {
		t.Errorf("a's rpd remaining = %d, want 0 after the store's answer", got)
	}
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

func TestTPDCountsTokensInStore(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	usage := newFakeUsage()
	e := newEnv(t, upstreamtest.Options{UsageTokens: 60}, withClock(clock), withUsage(usage))
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{TPD: ptr[int64](100)}
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	for range 2 {
		expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-c1")
	}
	expectRateLimited(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)),
		CodeRateLimitTPD, "tpd:c1", secondsToMidnight(clock.Now()))
	if got := usage.get("c1", clock.Now()).Tokens; got != 120 {
		t.Errorf("store counts %d tokens, want 120", got)
	}
}

// recordingHandler counts log records at or above Warn.
type recordingHandler struct {
	mu    sync.Mutex
	warns int
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.mu.Lock()
		h.warns++
		h.mu.Unlock()
	}
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.warns
}

func TestUsageStoreDownFailsOpen(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	usage := newFakeUsage()
	usage.setFail(errors.New("connection refused"))
	logs := &recordingHandler{}
	e := newEnv(t, upstreamtest.Options{}, withClock(clock), withUsage(usage),
		func(o *Options) { o.Logger = slog.New(logs) })
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{RPD: ptr(3)}
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	for range 2 {
		expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-c1")
		e.gw.usageDown.downUntil.Store(0) // ask the store again at once
	}
	if got := logs.count(); got != 1 {
		t.Errorf("%d warnings logged for two failing store calls, want 1", got)
	}
	if got := e.health("c1").Budgets[live.BudgetRPD].Remaining; got != 1 {
		t.Errorf("rpd remaining while the store is away = %d, want 1 (counted in memory)", got)
	}

	// Back again: the next count also writes the two counted in memory.
	usage.setFail(nil)
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-c1")
	if got := usage.get("c1", clock.Now()).Requests; got != 3 {
		t.Errorf("store counts %d requests, want 3 (1 + 2 written late)", got)
	}
	expectRateLimited(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), CodeRateLimitRPD, "rpd:c1", 0)
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

// TestTPDExhaustedWhileQueued checks that a request queued behind the one
// that used up the day's tokens is not dispatched: it gets RATE_LIMIT_TPD.
func TestTPDExhaustedWhileQueued(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	usage := newFakeUsage()
	e := newEnv(t, upstreamtest.Options{UsageTokens: 60}, withClock(clock), withUsage(usage))
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
	c.Overrides.TPD = ptr[int64](50)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)
	hold := make(chan struct{})
	e.mustBehave("k1", upstreamtest.Behavior{Hold: hold})
	first := make(chan reply, 1)
	go func() { first <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) }()
	waitFor(t, 2*time.Second, "first in flight", func() bool { return e.gate("model:c1:glm-5").InFlight == 1 })
	queued := make(chan reply, 1)
	go func() { queued <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) }()
	waitFor(t, 2*time.Second, "second queued", func() bool { return e.gate("model:c1:glm-5").Queued == 1 })
	close(hold)
	expectVia(t, <-first, "conn-c1")
	expectRateLimited(t, <-queued, CodeRateLimitTPD, "tpd:c1", secondsToMidnight(clock.Now()))
	if got := e.up.Requests("k1", "glm-5"); got != 1 {
		t.Errorf("upstream got %d requests, want 1 (the second came after the day's tokens ran out)", got)
	}
}
