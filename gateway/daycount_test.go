package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/google/go-cmp/cmp"
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

func (f *fakeUsage) ReserveTokens(_ context.Context, id string, day time.Time, tokens, limit int64) (int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail != nil {
		return 0, false, f.fail
	}
	u := f.entry(id, day)
	if limit > 0 && u.Tokens+tokens > limit {
		return u.Tokens, false, nil
	}
	u.Tokens += tokens
	f.set(id, day, u)
	return u.Tokens, true, nil
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

// TestTPDCountsTokensInStore: each request reserves 40 tokens (77 body
// bytes ÷ 4 + max_tokens 20) and is charged the 60 it used; the third's 40
// do not fit the 120 of 100 charged.
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
		expectVia(t, e.post(ctx, "/v1/chat/completions", chatBodyMax("glm-5", 20)), "conn-c1")
	}
	expectRateLimited(t, e.post(ctx, "/v1/chat/completions", chatBodyMax("glm-5", 20)),
		CodeRateLimitTPD, "tpd:c1", secondsToMidnight(clock.Now()))
	if got := usage.get("c1", clock.Now()).Tokens; got != 120 {
		t.Errorf("store counts %d tokens, want 120", got)
	}
}

// recordingHandler counts log records at or above Warn.
type recordingHandler struct {
	mu    sync.Mutex
	warns int
	lines []string // the warnings' messages and attributes
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		line := r.Message
		r.Attrs(func(a slog.Attr) bool {
			line += " " + a.String()
			return true
		})
		h.mu.Lock()
		h.warns++
		h.lines = append(h.lines, line)
		h.mu.Unlock()
	}
	return nil
}

func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }

// find counts the warnings whose text contains s.
func (h *recordingHandler) find(s string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

func (h *recordingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.warns
}

func TestUsageStoreDownFailsOpen(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	usage := newFakeUsage()
	usage.setFail(fmt.Errorf("connection refused: %w", ratelimit.ErrStoreUnavailable))
	logs := &recordingHandler{}
	e := newEnv(t, upstreamtest.Options{}, withClock(clock), withUsage(usage),
		func(o *Options) { o.Logger = slog.New(logs) })
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{RPD: ptr(3)}
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	for range 2 {
		expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-c1")
		e.gw.days.Retry() // ask the store again at once
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
	go func() { first <- e.post(ctx, "/v1/chat/completions", chatBodyMax("glm-5", 20)) }()
	waitFor(t, 2*time.Second, "first in flight", func() bool { return e.gate("model:c1:glm-5").InFlight == 1 })
	queued := make(chan reply, 1)
	go func() { queued <- e.post(ctx, "/v1/chat/completions", chatBodyMax("glm-5", 20)) }()
	waitFor(t, 2*time.Second, "second queued", func() bool { return e.gate("model:c1:glm-5").Queued == 1 })
	close(hold)
	expectVia(t, <-first, "conn-c1")
	expectRateLimited(t, <-queued, CodeRateLimitTPD, "tpd:c1", secondsToMidnight(clock.Now()))
	if got := e.up.Requests("k1", "glm-5"); got != 1 {
		t.Errorf("upstream got %d requests, want 1 (the second came after the day's tokens ran out)", got)
	}
}

// utcDay is the UTC midnight that starts t's day.
func utcDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}
