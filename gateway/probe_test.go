package gateway

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestProbe: a test request goes through the connection it names — its gate admits
// it, the upstream gets that connection's key — and reports the answer's text, or
// the upstream's error code, never failing over to another connection of the model.
func TestProbe(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	good, bad := e.conn("good", "key-good", "glm-5"), e.conn("bad", "key-bad", "glm-5")
	bad.Priority = 10 // a client request would try bad first, then fail over
	claude := e.conn("claude", "key-claude", "claude-x")
	claude.APIStyle = "anthropic"
	off := e.conn("off", "key-off", "glm-5")
	off.Enabled = false
	e.gw.Apply(Config{Connections: []Connection{good, bad, claude, off}})
	if err := e.up.SetKeyBehavior("key-bad", upstreamtest.Behavior{Fail: "401"}); err != nil {
		t.Fatal(err)
	}

	res, err := e.gw.Probe(t.Context(), "good")
	if err != nil {
		t.Fatalf("probe good: %v", err)
	}
	if !res.OK() || res.Status != http.StatusOK || !strings.HasPrefix(res.Text, "Hello") || res.Model != "glm-5" || res.Code != "" || res.Latency <= 0 {
		t.Errorf("probe good = %+v, want 200 with the fake upstream's text", res)
	}
	if got := e.gate("connection:good").Admitted; got != 1 {
		t.Errorf("the good connection's gate admitted %d, want the probe", got)
	}
	if got := e.gate("connection:bad").Admitted; got != 0 {
		t.Errorf("the bad connection's gate admitted %d, want 0", got)
	}

	res, err = e.gw.Probe(t.Context(), "bad")
	if err != nil {
		t.Fatalf("probe bad: %v", err)
	}
	if res.OK() || res.Status != http.StatusUnauthorized || res.Code != "invalid_api_key" || res.Message == "" {
		t.Errorf("probe bad = %+v, want the upstream's 401 invalid_api_key (no failover to good)", res)
	}
	if got := e.gate("connection:good").Admitted; got != 1 {
		t.Errorf("the bad connection's probe reached the good one (%d admitted)", got)
	}

	res, err = e.gw.Probe(t.Context(), "claude")
	if err != nil || res.Status != http.StatusOK || !strings.HasPrefix(res.Text, "Hello") {
		t.Errorf("probe an Anthropic-style connection = %+v, %v", res, err)
	}
	stats := e.up.Stats()
	if stats.ByKey["key-claude"].Requests != 1 {
		t.Errorf("the upstream saw %v requests by key, want one with key-claude", stats.ByKey)
	}

	for _, tt := range []struct {
		id   string
		want error
	}{{"off", ErrProbeDisabled}, {"nope", ErrProbeUnknown}} {
		if _, err := e.gw.Probe(t.Context(), tt.id); !errors.Is(err, tt.want) {
			t.Errorf("probe %s: %v, want %v", tt.id, err, tt.want)
		}
	}
}

// A connection test reaches the upstream whatever the connection's health —
// breaker open, cooling, suspended — and its answer changes none of it.
func TestProbeReachesAnUnhealthyConnectionAndChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	e.pair(limits.Settings{BreakerFailures: ptr(2), BreakerCooldownMs: ptr(600000)})
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "500", FailTimes: 2})
	ctx := testCtx(t)
	for range 2 {
		expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-b")
	}
	open := e.health("a")
	if open.Health != live.HealthBreakerOpen {
		t.Fatalf("a health = %+v, want breaker-open", open)
	}
	res, err := e.gw.Probe(ctx, "a")
	if err != nil || res.Status != http.StatusOK {
		t.Fatalf("probe with the breaker open = %+v, %v; want the upstream's 200", res, err)
	}
	if got := e.up.Requests("ka", "glm-5"); got != 3 {
		t.Errorf("a's upstream got %d requests, want the probe's too (3)", got)
	}
	if h := e.health("a"); h.Health != open.Health || !h.Until.Equal(open.Until) || h.Reason != open.Reason {
		t.Errorf("a health after a good probe = %+v, want it unchanged %+v", h, open)
	}

	// A failing answer to a test neither counts toward b's breaker nor cools or suspends it.
	for _, tc := range []struct {
		fail   upstreamtest.Failure
		status int
	}{{"500", 500}, {"500", 500}, {"429", 429}, {"401", 401}} {
		fail := tc.fail
		e.mustBehave("kb", upstreamtest.Behavior{Fail: fail})
		res, err := e.gw.Probe(ctx, "b")
		if err != nil || res.Status != tc.status {
			t.Fatalf("probe b (%s) = %+v, %v", fail, res, err)
		}
		if h := e.health("b"); h.Health != live.HealthOK {
			t.Fatalf("b health after a failed test (%s) = %+v, want ok", fail, h)
		}
	}
}
