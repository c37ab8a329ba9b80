package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// hangUp sends a streaming chat body as the key secret, reads the first
// byte of the answer and goes away.
func (e *env) hangUp(ctx context.Context, body, secret string) {
	e.t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, e.gwURL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("hang-up request: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("hang-up request: %d %s, want 200 (a stream to hang up on)", resp.StatusCode, b)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 1)); err != nil {
		e.t.Fatalf("hang-up request: read: %v", err)
	}
}

// TestHungUpAbsurdRequestLeavesConnection: a tenant's streaming request
// with an absurd max_tokens that hangs up mid-answer never takes a shared
// connection from the other tenants. Its estimate is capped at the
// settings' maxOutputReserve, and its unknown outcome charges the
// connection only the input estimate and the output relayed — before, a
// max_tokens of 999 999 999 999 999 999 filled the connection's tpm window
// for a day (an empty window takes any reservation, and the reservation
// stayed charged), and one of 999 950 on a tpd of 1 000 000 spent the day.
func TestHungUpAbsurdRequestLeavesConnection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		overrides limits.Overrides
		maxTokens string
	}{
		{"tpm, max_tokens near 1e18", limits.Overrides{TPM: ptr[int64](100_000)}, "999999999999999999"},
		{"tpd, max_tokens 999 950", limits.Overrides{TPD: ptr[int64](1_000_000)}, "999950"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			keys := map[string]ClientKey{
				"sk-greedy": {ID: "kg", Name: "greedy", Enabled: true},
				"sk-other":  {ID: "ko", Name: "other", Enabled: true},
			}
			e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
			never := make(chan struct{}) // the greedy stream's last chunk never comes
			if err := e.up.SetKeyBehavior("k1", upstreamtest.Behavior{HoldLast: never}); err != nil {
				t.Fatal(err)
			}
			c := e.conn("c1", "k1", "glm-5")
			c.Overrides = tc.overrides
			e.gw.Apply(Config{Connections: []Connection{c}, ClientKeys: keyConfig(keys)})
			ctx := testCtx(t)

			e.hangUp(ctx, `{"model":"glm-5","stream":true,"messages":[{"role":"user","content":"hi"}],"max_tokens":`+tc.maxTokens+`}`, "sk-greedy")
			waitFor(t, 5*time.Second, "the hung-up request to settle", func() bool { return e.gw.Reserved() == 0 })

			if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as("sk-other")...); r.status != http.StatusOK {
				t.Fatalf("another tenant's next request: %d %s, want 200", r.status, r.body)
			}
			for _, b := range e.gw.Snapshot().Connections {
				for name, v := range b.Budgets {
					if used := v.Limit - v.Remaining; used > 10_000 {
						t.Errorf("connection %s budget %s holds %d tokens after one hung-up request and one small one, want under 10 000", b.ID, name, used)
					}
				}
			}
		})
	}
}

// refusingUsage is a fakeUsage whose ReserveTokens answers refuse (set)
// with a statement error instead of an answer.
type refusingUsage struct {
	*fakeUsage
	refuse atomic.Pointer[error]
}

func (f *refusingUsage) ReserveTokens(ctx context.Context, id string, day time.Time, tokens, limit int64) (int64, bool, error) {
	if p := f.refuse.Load(); p != nil {
		return 0, false, *p
	}
	return f.fakeUsage.ReserveTokens(ctx, id, day, tokens, limit)
}

// TestStoreRefusalFailsOneRequest: a statement the usage store refuses (a
// range or constraint error) fails that one request with 500 INTERNAL,
// logged with the request's id, and never switches the gateway to counting
// in memory: the next request is counted in the store again (before, it
// was taken for the store being away, and for 5 s every budget was counted
// in memory, where sums overflowed).
func TestStoreRefusalFailsOneRequest(t *testing.T) {
	t.Parallel()
	u := &refusingUsage{fakeUsage: newFakeUsage()}
	logs := &recordingHandler{}
	e := newEnv(t, upstreamtest.Options{}, withUsage(u), func(o *Options) { o.Logger = slog.New(logs) })
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{TPD: ptr[int64](1_000_000)}
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	refused := error(errors.New(`ERROR: bigint out of range (SQLSTATE 22003)`))
	u.refuse.Store(&refused)
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if r.status != http.StatusInternalServerError || r.errorCode(t) != CodeInternal {
		t.Fatalf("refused statement: %d %s, want 500 %s", r.status, r.body, CodeInternal)
	}
	if got := logs.find("0af7651916cd43dd8448eb211c80319c"); got == 0 {
		t.Errorf("no log line carries the request's id")
	}
	if got := e.up.Requests("k1", "glm-5"); got != 0 {
		t.Errorf("upstream got %d requests, want 0 (refused before dispatch)", got)
	}
	u.refuse.Store(nil)
	if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)); r.status != http.StatusOK {
		t.Fatalf("next request: %d %s, want 200", r.status, r.body)
	}
	if got := u.get("c1", time.Now()).Tokens; got == 0 {
		t.Errorf("store holds no tokens for the next request: it was counted in memory (the refusal switched the store off)")
	}
	if got := e.gw.Reserved(); got != 0 {
		t.Errorf("Reserved() = %d, want 0", got)
	}
}

// goneUsage is a fakeUsage whose AddUsage says the id is gone (the key was
// deleted while its request was in flight).
type goneUsage struct{ *fakeUsage }

func (f goneUsage) AddUsage(context.Context, string, time.Time, int64, int64) (DayUsage, error) {
	return DayUsage{}, ratelimit.ErrUnknownID
}

// TestDeletedKeySettledQuietly: the settlement of a key deleted while its
// request was in flight is dropped quietly — no warning, and the store
// stays in use for everyone (before, it switched every budget to memory).
func TestDeletedKeySettledQuietly(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{"sk-k": {ID: "kk", Name: "k", Enabled: true, Limits: limits.ClientKeyLimits{TPD: ptr[int64](1_000_000)}}}
	ku := goneUsage{newFakeUsage()}
	conns := newFakeUsage()
	logs := &recordingHandler{}
	e := newEnv(t, upstreamtest.Options{UsageTokens: 30}, withKeys(keys), withUsage(conns),
		func(o *Options) { o.KeyUsage = ku; o.Logger = slog.New(logs) })
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{TPD: ptr[int64](1_000_000)}
	e.gw.Apply(Config{Connections: []Connection{c}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)
	for i := range 2 {
		if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as("sk-k")...); r.status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i+1, r.status, r.body)
		}
	}
	if n := logs.count(); n != 0 {
		t.Errorf("%d warnings logged, want none (a deleted key's settlement is dropped quietly)", n)
	}
	if got := conns.get("c1", time.Now()).Tokens; got != 60 {
		t.Errorf("connection's day in the store = %d tokens, want 60 (the store still in use)", got)
	}
}

// TestEstimateCountsChoicesAndMedia: n (and Gemini's candidateCount)
// multiplies the output bound, and each image or file part adds 1 600
// tokens, so a day budget that holds one answer does not admit eight.
func TestEstimateCountsChoicesAndMedia(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{UsageTokens: 10})
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{TPD: ptr[int64](1_000)}
	g := e.geminiConn("g1", "k2", "gemini-x")
	g.Overrides = limits.Overrides{TPD: ptr[int64](1_000)}
	e.gw.Apply(Config{Connections: []Connection{c, g}})
	ctx := testCtx(t)
	const img = `{"model":"glm-5","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type": "image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`
	for _, tc := range []struct {
		name, path, body string
		want             int
	}{
		{"n 1", "/v1/chat/completions", `{"model":"glm-5","max_tokens":100,"n":1,"messages":[{"role":"user","content":"hi"}]}`, http.StatusOK},
		{"n 8", "/v1/chat/completions", `{"model":"glm-5","max_tokens":100,"n":8,"messages":[{"role":"user","content":"hi"}]}`, http.StatusOK},
		{"n 10", "/v1/chat/completions", `{"model":"glm-5","max_tokens":100,"n":10,"messages":[{"role":"user","content":"hi"}]}`, http.StatusTooManyRequests},
		{"image part", "/v1/chat/completions", img, http.StatusTooManyRequests},
		{"candidateCount 1", "/v1beta/models/gemini-x:generateContent", `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":100,"candidateCount":1}}`, http.StatusOK},
		{"candidateCount 10", "/v1beta/models/gemini-x:generateContent", `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":100,"candidateCount":10}}`, http.StatusTooManyRequests},
		{"inlineData part", "/v1beta/models/gemini-x:generateContent", `{"contents":[{"parts":[{"text":"hi"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]}],"generationConfig":{"maxOutputTokens":10}}`, http.StatusTooManyRequests},
	} {
		if r := e.post(ctx, tc.path, tc.body); r.status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.want)
		}
	}
}

// TestParallelChoicesHoldMoneyBudget: 40 parallel requests with n 8 on a
// key with a $0.50 daily budget overrun it by at most one request's actual
// cost (before: n was ignored, each reserved an eighth of its cost, and all
// 40 went upstream — 6× the budget).
func TestParallelChoicesHoldMoneyBudget(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{"sk-b": {ID: "kb", Name: "batch", Enabled: true,
		Limits: limits.ClientKeyLimits{BudgetUSDDaily: ptr(limits.Micros(500_000))}}}
	// 24 000 tokens reported, 8 000 of them output: $0.08 at $10 per
	// million output tokens, what n 8 × max_tokens 1 000 reserves.
	e := newEnv(t, upstreamtest.Options{UsageTokens: 24_000}, withKeys(keys))
	hold := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	c := e.conn("c1", "k1", "glm-5")
	prices := limits.Prices{"glm-5": {Output: ptr(limits.Micros(10_000_000))}}
	e.gw.Apply(Config{Settings: limits.Settings{Prices: prices}, Connections: []Connection{c}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)
	const n = 40
	body := `{"model":"glm-5","max_tokens":1000,"n":8,"messages":[{"role":"user","content":"hi"}]}`
	var (
		wg      sync.WaitGroup
		refused atomic.Int64
		served  atomic.Int64
	)
	for range n {
		wg.Go(func() {
			switch r := e.post(ctx, "/v1/chat/completions", body, as("sk-b")...); r.status {
			case http.StatusOK:
				served.Add(1)
			case http.StatusTooManyRequests:
				refused.Add(1)
			default:
				t.Errorf("status %d %s", r.status, r.body)
			}
		})
	}
	waitFor(t, 10*time.Second, "every request upstream or refused", func() bool {
		return int64(e.up.InFlight())+refused.Load() == n
	})
	close(hold)
	wg.Wait()
	const budget, perRequest = 500_000, 80_000
	if spent := served.Load() * perRequest; spent > budget+perRequest {
		t.Errorf("%d requests served, $%s spent on a $0.50 budget: over by more than one request's cost", served.Load(), limits.Micros(spent))
	}
	if served.Load() == 0 {
		t.Errorf("nothing served")
	}
}

// spendUsage is a fakeUsage that keeps money budgets too (a
// ratelimit.SpendCounter), per key and UTC day and month.
type spendUsage struct {
	*fakeUsage
	smu   sync.Mutex
	spend map[string]int64 // id + " d " + day, id + " m " + month
}

func newSpendUsage() *spendUsage {
	return &spendUsage{fakeUsage: newFakeUsage(), spend: map[string]int64{}}
}

func spendKeys(id string, at time.Time) (string, string) {
	at = at.UTC()
	return id + " d " + at.Format(time.DateOnly), id + " m " + at.Format("2006-01")
}

func (s *spendUsage) failing() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fail
}

func (s *spendUsage) ReserveSpend(_ context.Context, id string, at time.Time, micros, dayLimit, monthLimit int64) (ratelimit.Spend, ratelimit.SpendPeriod, error) {
	if err := s.failing(); err != nil {
		return ratelimit.Spend{}, 0, err
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	d, m := spendKeys(id, at)
	sp := ratelimit.Spend{Day: s.spend[d], Month: s.spend[m]}
	switch {
	case dayLimit > 0 && sp.Day+micros > dayLimit:
		return sp, ratelimit.SpendDay, nil
	case monthLimit > 0 && sp.Month+micros > monthLimit:
		return sp, ratelimit.SpendMonth, nil
	}
	s.spend[d] += micros
	s.spend[m] += micros
	return ratelimit.Spend{Day: s.spend[d], Month: s.spend[m]}, ratelimit.SpendFits, nil
}

func (s *spendUsage) AddSpend(_ context.Context, id string, at time.Time, micros int64) (ratelimit.Spend, error) {
	if err := s.failing(); err != nil {
		return ratelimit.Spend{}, err
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	d, m := spendKeys(id, at)
	s.spend[d] = max(s.spend[d]+micros, 0)
	s.spend[m] = max(s.spend[m]+micros, 0)
	return ratelimit.Spend{Day: s.spend[d], Month: s.spend[m]}, nil
}

func (s *spendUsage) Spend(_ context.Context, id string, at time.Time) (ratelimit.Spend, error) {
	if err := s.failing(); err != nil {
		return ratelimit.Spend{}, err
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	d, m := spendKeys(id, at)
	return ratelimit.Spend{Day: s.spend[d], Month: s.spend[m]}, nil
}

func (s *spendUsage) spendOf(id string, at time.Time) ratelimit.Spend {
	s.smu.Lock()
	defer s.smu.Unlock()
	d, m := spendKeys(id, at)
	return ratelimit.Spend{Day: s.spend[d], Month: s.spend[m]}
}

var errStoreAway = fmt.Errorf("dial tcp: connection refused: %w", ratelimit.ErrStoreUnavailable)

// TestStoreOutageSpendReachesRows: a single process whose usage store is
// away counts the budgets in memory — they keep holding — and when the
// store returns, its day and month rows hold every token and micro-dollar
// spent meanwhile: answers that cost more than their estimate, and the
// days on both sides of a midnight that ends a month (fake clock).
func TestStoreOutageSpendReachesRows(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	clock.Advance(time.Date(2026, 1, 31, 23, 59, 0, 0, time.UTC).Sub(clock.Now()))
	keys := map[string]ClientKey{
		"sk-k": {ID: "kk", Name: "k", Enabled: true,
			Limits: limits.ClientKeyLimits{TPD: ptr[int64](1_000_000), BudgetUSDDaily: ptr(limits.Micros(100_000_000))}},
		"sk-small": {ID: "ks", Name: "small", Enabled: true, Limits: limits.ClientKeyLimits{TPD: ptr[int64](500)}},
	}
	conns, ku := newFakeUsage(), newSpendUsage()
	// 300 tokens reported, 100 of them output: 200 × $1 + 100 × $10 per
	// million = 1 200 micro-dollars, over the 70-token estimate.
	e := newEnv(t, upstreamtest.Options{UsageTokens: 300}, withKeys(keys), withClock(clock), withUsage(conns),
		func(o *Options) { o.KeyUsage = ku })
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{TPD: ptr[int64](1_000_000)}
	prices := limits.Prices{"glm-5": {Input: ptr(limits.Micros(1_000_000)), Output: ptr(limits.Micros(10_000_000))}}
	e.gw.Apply(Config{Settings: limits.Settings{Prices: prices}, Connections: []Connection{c}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)
	send := func(n int) { // n requests at once
		t.Helper()
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if r := e.post(ctx, "/v1/chat/completions", chatBodyMax("glm-5", 50), as("sk-k")...); r.status != http.StatusOK {
					t.Errorf("request %d at %v: %d %s", i+1, clock.Now(), r.status, r.body)
				}
			})
		}
		wg.Wait()
	}
	jan, feb := clock.Now(), clock.Now().Add(2*time.Minute)

	conns.setFail(errStoreAway)
	ku.setFail(errStoreAway)
	send(20)
	// The budgets keep holding from memory: 300 tokens, then 600, then no
	// room for another estimate of about 70 in a tpd of 500.
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		if r := e.post(ctx, "/v1/chat/completions", chatBodyMax("glm-5", 50), as("sk-small")...); r.status != want {
			t.Errorf("small key's request %d during the outage: %d %s, want %d", i+1, r.status, r.body, want)
		}
	}
	clock.Advance(2 * time.Minute) // midnight, and February
	send(19)
	conns.setFail(nil)
	ku.setFail(nil)
	e.gw.days.Retry() // the store is asked again at once, not after its retry period
	send(1)
	// The small key sends nothing more: the periodic reload writes its
	// pending counts.
	if err := e.gw.LoadUsage(ctx); err != nil {
		t.Fatal(err)
	}

	const tokens, cost = 300, 1_200
	for _, tc := range []struct {
		what      string
		got, want int64
	}{
		{"connection's Jan 31 tokens", conns.get("c1", jan).Tokens, 22 * tokens},
		{"small key's Jan 31 tokens", ku.get("ks", jan).Tokens, 2 * tokens},
		{"connection's Feb 1 tokens", conns.get("c1", feb).Tokens, 20 * tokens},
		{"key's Jan 31 tokens", ku.get("kk", jan).Tokens, 20 * tokens},
		{"key's Feb 1 tokens", ku.get("kk", feb).Tokens, 20 * tokens},
		{"key's Jan 31 spend", ku.spendOf("kk", jan).Day, 20 * cost},
		{"key's January spend", ku.spendOf("kk", jan).Month, 20 * cost},
		{"key's Feb 1 spend", ku.spendOf("kk", feb).Day, 20 * cost},
		{"key's February spend", ku.spendOf("kk", feb).Month, 20 * cost},
	} {
		if tc.got != tc.want {
			t.Errorf("%s in the store = %d, want %d", tc.what, tc.got, tc.want)
		}
	}
	if got := e.gw.Reserved(); got != 0 {
		t.Errorf("Reserved() = %d, want 0", got)
	}
}

// TestBudgetFailClosed: with BudgetFailClosed (cluster mode), while the
// usage store is unreachable a request with day or money budgets gets 503
// USAGE_STORE_UNAVAILABLE with Retry-After 1 and nothing is dispatched; a
// key and connection without them are served.
func TestBudgetFailClosed(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		"sk-money": {ID: "km", Name: "money", Enabled: true, Limits: limits.ClientKeyLimits{BudgetUSDDaily: ptr(limits.Micros(1_000_000))}},
		"sk-free":  {ID: "kf", Name: "free", Enabled: true},
	}
	conns, ku := newFakeUsage(), newSpendUsage()
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys), withUsage(conns),
		func(o *Options) { o.KeyUsage = ku; o.BudgetFailClosed = true })
	day := e.conn("c1", "k1", "glm-5")
	day.Overrides = limits.Overrides{TPD: ptr[int64](1_000_000)}
	free := e.conn("c2", "k2", "glm-6")
	prices := limits.Prices{"glm-5": {Output: ptr(limits.Micros(1_000_000))}, "glm-6": {Output: ptr(limits.Micros(1_000_000))}}
	e.gw.Apply(Config{Settings: limits.Settings{Prices: prices}, Connections: []Connection{day, free}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)
	conns.setFail(errStoreAway)
	ku.setFail(errStoreAway)
	for _, tc := range []struct{ name, key, model string }{
		{"key with a money budget", "sk-money", "glm-6"},
		{"connection with tpd", "sk-free", "glm-5"},
	} {
		r := e.post(ctx, "/v1/chat/completions", chatBody(tc.model, false), as(tc.key)...)
		if r.status != http.StatusServiceUnavailable || r.errorCode(t) != CodeUsageStoreUnavailable || r.header.Get("Retry-After") != "1" {
			t.Errorf("%s: %d %q %s, want 503 %s with Retry-After 1", tc.name, r.status, r.header.Get("Retry-After"), r.body, CodeUsageStoreUnavailable)
		}
	}
	if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-6", false), as("sk-free")...); r.status != http.StatusOK {
		t.Errorf("no day or money budget on the path: %d %s, want 200", r.status, r.body)
	}
	if got := e.up.Requests("k1", "glm-5"); got != 0 {
		t.Errorf("connection c1 got %d requests, want 0", got)
	}
	if got := e.gw.Reserved(); got != 0 {
		t.Errorf("Reserved() = %d, want 0", got)
	}
}
