package health

import (
	"net/http"
	"strings"
	"testing"
	"time"
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
			if got := RateLimitCooldown(h, now); got != tt.want {
				t.Errorf("cooldown = %s, want %s", got, tt.want)
			}
			want := false
			for i := 0; i+1 < len(tt.hdr); i += 2 {
				want = want || strings.Contains(tt.hdr[i], "remaining") && tt.hdr[i+1] == "0"
			}
			if got := RateLimitExhausted(h); got != want {
				t.Errorf("exhausted = %v, want %v", got, want)
			}
		})
	}
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
		if RateLimitExhausted(h) || RateLimitCooldown(h, now) != 0 {
			t.Fatal("not exhausted, yet a cooldown")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per answer, want 0", allocs)
	}
}
