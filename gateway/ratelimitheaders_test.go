package gateway

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/health"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

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
				if h.Health != live.HealthCooling || h.Reason != health.ReasonRateLimitHeaders || !h.Until.Equal(clock.Now().Add(2*time.Second)) {
					t.Errorf("a health = %+v, want cooling until now+2s for %q", h, health.ReasonRateLimitHeaders)
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

// TestCountTokens429LeavesMessages (issue 23 item 6): a 429 to count_tokens
// does not cool the model, so /v1/messages still reaches the connection.
func TestCountTokens429LeavesMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	a := e.conn("a", "ka", "claude-x")
	a.APIStyle = "anthropic"
	e.gw.Apply(Config{Connections: []Connection{a}})
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "429", RetryAfter: time.Minute, FailTimes: 1})
	ctx := testCtx(t)
	if r := e.post(ctx, "/v1/messages/count_tokens", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`); r.status != http.StatusTooManyRequests {
		t.Fatalf("count_tokens: status %d, want the upstream's 429: %s", r.status, r.body)
	}
	if h := e.health("a"); h.Health != live.HealthOK {
		t.Errorf("health after a count_tokens 429 = %+v, want ok", h)
	}
	expectVia(t, e.post(ctx, "/v1/messages", `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), "conn-a")
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
	if h := e.health("a"); h.Health != live.HealthCooling || h.Reason != health.ReasonRateLimitHeaders {
		t.Errorf("health after messages = %+v, want cooling for %q", h, health.ReasonRateLimitHeaders)
	}
}
