package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestRateLimitCooldown: the cooldown a response's rate-limit headers ask
// for — OpenAI durations and Anthropic RFC 3339 instants, the earliest reset
// of the exhausted dimensions, capped at a minute, nothing for unusable or
// past resets.
func TestRateLimitCooldown(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339Nano) }
	tests := []struct {
		name string
		hdr  []string // name, value, ... as an upstream sends them (any case)
		want time.Duration
	}{
		{name: "no headers", want: 0},
		{name: "requests left", hdr: []string{"x-ratelimit-remaining-requests", "3", "x-ratelimit-reset-requests", "2s"}, want: 0},
		{name: "openai requests 2s", hdr: []string{"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "2s"}, want: 2 * time.Second},
		{name: "openai 20ms", hdr: []string{"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "20ms"}, want: 20 * time.Millisecond},
		{name: "openai 0.5s", hdr: []string{"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "0.5s"}, want: 500 * time.Millisecond},
		{name: "openai 59.56s", hdr: []string{"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "59.56s"}, want: 59560 * time.Millisecond},
		{name: "openai 1m30s capped", hdr: []string{"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1m30s"}, want: time.Minute},
		{name: "openai 6m0s capped", hdr: []string{"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "6m0s"}, want: time.Minute},
		{name: "openai 2m59.56s capped", hdr: []string{"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "2m59.56s"}, want: time.Minute},
		{name: "openai garbage", hdr: []string{"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "soon"}, want: 0},
		{name: "openai bare number", hdr: []string{"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "2"}, want: 0},
		{name: "openai negative", hdr: []string{"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "-2s"}, want: 0},
		{name: "openai zero", hdr: []string{"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "0s"}, want: 0},
		{name: "openai no reset", hdr: []string{"x-ratelimit-remaining-requests", "0"}, want: 0},
		{name: "remaining not a plain zero", hdr: []string{"x-ratelimit-remaining-requests", "00", "x-ratelimit-reset-requests", "2s"}, want: 0},
		{name: "earliest of requests and tokens", hdr: []string{
			"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "2s",
			"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "300ms"}, want: 300 * time.Millisecond},
		{name: "only the exhausted dimension counts", hdr: []string{
			"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "2s",
			"x-ratelimit-remaining-tokens", "1500", "x-ratelimit-reset-tokens", "300ms"}, want: 2 * time.Second},
		{name: "garbage dimension ignored, the other wins", hdr: []string{
			"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "later",
			"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "1s"}, want: time.Second},
		{name: "anthropic requests", hdr: []string{"anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", at(2 * time.Second)}, want: 2 * time.Second},
		{name: "anthropic fractional", hdr: []string{"anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2026-01-02T03:04:07.5Z"}, want: 2500 * time.Millisecond},
		{name: "anthropic offset", hdr: []string{"anthropic-ratelimit-tokens-remaining", "0", "anthropic-ratelimit-tokens-reset", "2026-01-02T04:04:15+01:00"}, want: 10 * time.Second},
		{name: "anthropic past", hdr: []string{"anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", at(-time.Second)}, want: 0},
		{name: "anthropic garbage", hdr: []string{"anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "tomorrow"}, want: 0},
		{name: "anthropic duration is not an instant", hdr: []string{"anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2s"}, want: 0},
		{name: "anthropic capped", hdr: []string{"anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", at(2 * time.Hour)}, want: time.Minute},
		{name: "anthropic earliest of input and output", hdr: []string{
			"anthropic-ratelimit-input-tokens-remaining", "0", "anthropic-ratelimit-input-tokens-reset", at(10 * time.Second),
			"anthropic-ratelimit-output-tokens-remaining", "0", "anthropic-ratelimit-output-tokens-reset", at(3 * time.Second),
			"anthropic-ratelimit-requests-remaining", "40", "anthropic-ratelimit-requests-reset", at(time.Second)}, want: 3 * time.Second},
		{name: "anthropic past ignored, future wins", hdr: []string{
			"anthropic-ratelimit-input-tokens-remaining", "0", "anthropic-ratelimit-input-tokens-reset", at(-5 * time.Second),
			"anthropic-ratelimit-tokens-remaining", "0", "anthropic-ratelimit-tokens-reset", at(4 * time.Second)}, want: 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tt.hdr); i += 2 {
				h.Set(tt.hdr[i], tt.hdr[i+1])
			}
			if got := rateLimitCooldown(h, now); got != tt.want {
				t.Errorf("cooldown = %s, want %s", got, tt.want)
			}
			want := false
			for i := 0; i+1 < len(tt.hdr); i += 2 {
				want = want || strings.Contains(tt.hdr[i], "remaining") && tt.hdr[i+1] == "0"
			}
			if got := rateLimitExhausted(h); got != want {
				t.Errorf("exhausted = %v, want %v", got, want)
			}
		})
	}
}

// TestRateLimitHeadersCoolConnection: an answer whose rate-limit headers say
// the account is spent (OpenAI and Anthropic names) keeps the next request
// off that connection, for every model, until the reset: it goes to the
// backup connection when there is one, else it gets UPSTREAM_COOLDOWN with
// Retry-After; the health says why; after the reset (on the gateway's
// clock) the connection is used again.
func TestRateLimitHeadersCoolConnection(t *testing.T) {
	t.Parallel()
	type style struct {
		name, apiStyle, path, shape string
		body                        func(model string) string
		header                      func(now time.Time) http.Header
	}
	styles := []style{
		{name: "openai", apiStyle: "openai", path: "/v1/chat/completions", shape: "openai",
			body: func(m string) string { return chatBody(m, false) },
			header: func(time.Time) http.Header {
				return http.Header{"x-ratelimit-remaining-requests": {"0"}, "x-ratelimit-reset-requests": {"2s"},
					"x-ratelimit-remaining-tokens": {"90000"}, "x-ratelimit-reset-tokens": {"6m0s"}}
			}},
		{name: "anthropic", apiStyle: "anthropic", path: "/v1/messages", shape: "anthropic",
			body: func(m string) string {
				return `{"model":"` + m + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
			},
			header: func(now time.Time) http.Header {
				return http.Header{"anthropic-ratelimit-requests-remaining": {"0"},
					"anthropic-ratelimit-requests-reset": {now.Add(2 * time.Second).Format(time.RFC3339)}}
			}},
	}
	for _, st := range styles {
		for _, backup := range []bool{true, false} {
			name := st.name + "/single connection"
			if backup {
				name = st.name + "/with backup"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				clock := newFakeClock()
				e := newEnv(t, upstreamtest.Options{}, withClock(clock))
				a := e.conn("a", "ka", "m1", "m2")
				a.APIStyle, a.Priority = st.apiStyle, 10
				conns := []Connection{a}
				if backup {
					b := e.conn("b", "kb", "m1")
					b.APIStyle = st.apiStyle
					conns = append(conns, b)
				}
				e.gw.Apply(Config{Connections: conns})
				e.mustBehave("ka", upstreamtest.Behavior{Header: st.header(clock.Now())})
				ctx := testCtx(t)

				expectVia(t, e.post(ctx, st.path, st.body("m1")), "conn-a")
				// Later answers carry no exhausted headers: only the first one cools.
				e.mustBehave("ka", upstreamtest.Behavior{})
				h := e.health("a")
				if h.Health != live.HealthCooling || h.Reason != reasonRateLimitHeaders || !h.Until.Equal(clock.Now().Add(2*time.Second)) {
					t.Errorf("a health = %+v, want cooling until now+2s for %q", h, reasonRateLimitHeaders)
				}

				r := e.post(ctx, st.path, st.body("m1"))
				if backup {
					expectVia(t, r, "conn-b")
					if got := e.up.Requests("kb", "m1"); got != 1 {
						t.Errorf("b got %d requests, want 1", got)
					}
				} else {
					if r.status != http.StatusTooManyRequests {
						t.Fatalf("while a cools: status %d, want 429: %s", r.status, r.body)
					}
					checkShape(t, r, st.shape, CodeUpstreamCooldown)
					if got := r.header.Get("Retry-After"); got != "2" {
						t.Errorf("Retry-After = %q, want 2", got)
					}
				}
				// Every model of the connection cools, not only the one answered.
				r = e.post(ctx, st.path, st.body("m2"))
				if r.status != http.StatusTooManyRequests {
					t.Fatalf("m2 while a cools: status %d, want 429: %s", r.status, r.body)
				}
				checkShape(t, r, st.shape, CodeUpstreamCooldown)
				if got := e.up.Requests("ka", "m1") + e.up.Requests("ka", "m2"); got != 1 {
					t.Fatalf("a was dispatched to while cooling: %d requests, want 1", got)
				}

				clock.Advance(2*time.Second - time.Millisecond)
				if r := e.post(ctx, st.path, st.body("m2")); r.status != http.StatusTooManyRequests {
					t.Fatalf("m2 1ms before the reset: status %d, want 429", r.status)
				}
				clock.Advance(time.Millisecond)
				expectVia(t, e.post(ctx, st.path, st.body("m1")), "conn-a")
				expectVia(t, e.post(ctx, st.path, st.body("m2")), "conn-a")
				if got := e.up.Requests("ka", "m1") + e.up.Requests("ka", "m2"); got != 3 {
					t.Errorf("a got %d requests after the reset, want 3 in all", got)
				}
				if h := e.health("a"); h.Health != live.HealthOK {
					t.Errorf("a health after the reset = %+v, want ok", h)
				}
			})
		}
	}
}

// TestRateLimitHeadersWith429: a 429 that also carries exhausted headers
// cools the model for its Retry-After and the connection for the reset;
// health shows the longer one. ResetHealth clears the connection's cooldown
// too.
func TestRateLimitHeadersWith429(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, withClock(clock))
	e.gw.Apply(Config{Connections: []Connection{e.conn("a", "ka", "m1", "m2")}})
	ctx := testCtx(t)
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "429", RetryAfter: 10 * time.Second, FailTimes: 1,
		Header: http.Header{"x-ratelimit-remaining-requests": {"0"}, "x-ratelimit-reset-requests": {"3s"}}})
	if r := e.post(ctx, "/v1/chat/completions", chatBody("m1", false)); r.status != http.StatusTooManyRequests {
		t.Fatalf("status %d, want the upstream's 429", r.status)
	}
	e.mustBehave("ka", upstreamtest.Behavior{})
	if h := e.health("a"); h.Health != live.HealthCooling || !h.Until.Equal(clock.Now().Add(10*time.Second)) || !strings.Contains(h.Reason, "429") {
		t.Errorf("health = %+v, want cooling 10s for the 429", h)
	}
	// m2 cools only for the headers' reset.
	r := e.post(ctx, "/v1/chat/completions", chatBody("m2", false))
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "3" {
		t.Fatalf("m2: status %d Retry-After %q, want 429 with 3", r.status, r.header.Get("Retry-After"))
	}
	checkShape(t, r, "openai", CodeUpstreamCooldown)
	clock.Advance(3 * time.Second)
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("m2", false)), "conn-a")

	e.mustBehave("ka", upstreamtest.Behavior{Header: http.Header{"x-ratelimit-remaining-tokens": {"0"}, "x-ratelimit-reset-tokens": {"5s"}}})
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("m2", false)), "conn-a")
	if !e.gw.ResetHealth(ctx, "a") {
		t.Fatal("ResetHealth(a) = false")
	}
	if h := e.health("a"); h.Health != live.HealthOK {
		t.Errorf("health after ResetHealth = %+v, want ok", h)
	}
	e.mustBehave("ka", upstreamtest.Behavior{})
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("m2", false)), "conn-a")
}

// TestRateLimitHeadersCommonPathAllocs: an answer with rate-limit headers
// that are not exhausted (the common case) costs no allocation.
func TestRateLimitHeadersCommonPathAllocs(t *testing.T) {
	h := http.Header{}
	h.Set("x-ratelimit-remaining-requests", "499")
	h.Set("x-ratelimit-reset-requests", "120ms")
	h.Set("x-ratelimit-remaining-tokens", "149984")
	h.Set("x-ratelimit-reset-tokens", "6ms")
	h.Set("Content-Type", "application/json")
	now := time.Now()
	allocs := testing.AllocsPerRun(100, func() {
		if rateLimitExhausted(h) || rateLimitCooldown(h, now) != 0 {
			t.Fatal("not exhausted, yet a cooldown")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per answer, want 0", allocs)
	}
}

// TestRateLimitHeadersCountTokensIgnored: exhausted headers on a
// count_tokens answer (Anthropic limits token counting on its own) do not
// cool the connection for messages.
func TestRateLimitHeadersCountTokensIgnored(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, withClock(clock))
	a := e.conn("a", "ka", "claude-x")
	a.APIStyle = "anthropic"
	e.gw.Apply(Config{Connections: []Connection{a}})
	e.mustBehave("ka", upstreamtest.Behavior{Header: http.Header{"anthropic-ratelimit-requests-remaining": {"0"},
		"anthropic-ratelimit-requests-reset": {clock.Now().Add(5 * time.Second).Format(time.RFC3339)}}})
	ctx := testCtx(t)
	body := `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`
	if r := e.post(ctx, "/v1/messages/count_tokens", body); r.status != http.StatusOK {
		t.Fatalf("count_tokens: status %d, want 200: %s", r.status, r.body)
	}
	if h := e.health("a"); h.Health != live.HealthOK {
		t.Errorf("health after count_tokens = %+v, want ok", h)
	}
	expectVia(t, e.post(ctx, "/v1/messages", `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), "conn-a")
	if h := e.health("a"); h.Health != live.HealthCooling || h.Reason != reasonRateLimitHeaders {
		t.Errorf("health after messages = %+v, want cooling for %q", h, reasonRateLimitHeaders)
	}
}
