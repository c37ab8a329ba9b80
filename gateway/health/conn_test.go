package health

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name, in string
		want     time.Duration
	}{
		{name: "seconds", in: "2", want: 2 * time.Second},
		{name: "zero", in: "0", want: 0},
		{name: "empty", in: "", want: 0},
		{name: "garbage", in: "soon", want: 0},
		{name: "http date", in: now.Add(90 * time.Second).Format(http.TimeFormat), want: 90 * time.Second},
		{name: "past date", in: now.Add(-time.Minute).Format(http.TimeFormat), want: 0},
		{name: "huge", in: "999999999", want: time.Hour},
		{name: "far http date", in: now.Add(48 * time.Hour).Format(http.TimeFormat), want: time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParseRetryAfter(tc.in, now); got != tc.want {
				t.Errorf("ParseRetryAfter(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

// TestConnCooldownBackoff: a 429 without Retry-After cools the model for
// 1 s, doubling with each further 429 until a success ends the streak; the
// status names the latest reason; other models stay available.
func TestConnCooldownBackoff(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := NewConn(BreakerConfig{})
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if until := h.CoolDown("m", now, 0, "upstream 429"); !until.Equal(now.Add(want)) {
			t.Fatalf("429 number %d cools until %v, want %v", i+1, until, now.Add(want))
		}
	}
	if why, until := h.Check("/chat/completions", "m", now); why != Cooling || !until.Equal(now.Add(4*time.Second)) {
		t.Errorf("Check(m) = %v until %v, want Cooling for 4 s", why, until)
	}
	if why, _ := h.Check("/chat/completions", "other", now); why != Available {
		t.Errorf("Check(other) = %v, want Available", why)
	}
	if state, _, reason := h.Status(now); state != live.HealthCooling || reason != "upstream 429" {
		t.Errorf("Status = %s (%s), want cooling (upstream 429)", state, reason)
	}
	h.Succeeded("m")
	if until := h.CoolDown("m", now, 30*time.Second, "upstream 429"); !until.Equal(now.Add(30 * time.Second)) {
		t.Errorf("Retry-After 30 s after a success cools until %v, want 30 s", until)
	}
	if until := h.CoolDown("n", now, 0, "upstream 429"); !until.Equal(now.Add(time.Second)) {
		t.Errorf("first 429 of another model cools until %v, want 1 s (its own streak)", until)
	}
}

// TestSuccessKeepsCooldownDeadline (issue 23 item 6): a 2xx after a 429's
// Retry-After (from a request dispatched before it) leaves the cooldown's
// deadline as it was; it only ends the backoff streak, so the next 429
// without Retry-After backs off from the start.
func TestSuccessKeepsCooldownDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := NewConn(BreakerConfig{})
	h.CoolDown("m", now, 0, "upstream 429")
	h.CoolDown("m", now, 0, "upstream 429") // streak 2
	until := h.CoolDown("m", now, 30*time.Second, "upstream 429")
	h.Succeeded("m")
	if why, got := h.Check("/chat/completions", "m", now.Add(time.Second)); why != Cooling || !got.Equal(until) {
		t.Errorf("after a success: Check = %v until %v, want Cooling until %v (the Retry-After deadline)", why, got, until)
	}
	if why, _ := h.Check("/chat/completions", "m", until); why != Available {
		t.Errorf("at the deadline: Check = %v, want Available", why)
	}
	if got := h.CoolDown("m", until, 0, "upstream 429"); !got.Equal(until.Add(time.Second)) {
		t.Errorf("next 429 after the success cools until %v, want 1 s (the streak ended)", got)
	}
}

// TestConnSuspendAndReset: a suspension keeps every model out until it
// ends, ahead of any cooldown; Reset clears both.
func TestConnSuspendAndReset(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := NewConn(BreakerConfig{})
	h.CoolConnection(now, time.Minute, ReasonRateLimitHeaders)
	h.Suspend(now, 10*time.Minute, "upstream 401")
	if why, until := h.Check("/chat/completions", "m", now); why != Suspended || !until.Equal(now.Add(10*time.Minute)) {
		t.Errorf("Check = %v until %v, want Suspended for 10 min", why, until)
	}
	if why, _ := h.Check("/chat/completions", "m", now.Add(10*time.Minute)); why != Available {
		t.Errorf("after the suspension and the cooldown: %v, want Available", why)
	}
	h.Suspend(now, 10*time.Minute, "upstream 403")
	h.Reset()
	if state, _, _ := h.Status(now); state != live.HealthOK {
		t.Errorf("Status after Reset = %s, want ok", state)
	}
}

// TestConnBreakerOpens: consecutive failures open the breaker, excluded
// outcomes do not count.
func TestConnBreakerOpens(t *testing.T) {
	t.Parallel()
	now := time.Now()
	h := NewConn(BreakerConfig{Failures: 2, Cooldown: time.Hour})
	for _, outcome := range []error{errors.New("upstream 502"), ErrExcluded, ErrExcluded, errors.New("upstream 503")} {
		done, ok := h.Allow()
		if !ok {
			t.Fatal("breaker refused an attempt before two failures")
		}
		done(outcome)
	}
	if why, _ := h.Check("/chat/completions", "m", now); why != Breaker {
		t.Fatalf("Check after two failures = %v, want Breaker", why)
	}
	if _, ok := h.Allow(); ok {
		t.Error("an open breaker let an attempt through")
	}
	if state, _, _ := h.Status(now); state != live.HealthBreakerOpen {
		t.Errorf("Status = %s, want breaker open", state)
	}
}
