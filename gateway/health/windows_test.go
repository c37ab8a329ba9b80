package health

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// TestParseWindows reads both header families from samples as the
// providers send them.
func TestParseWindows(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 9, 17, 4, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		h        http.Header
		want     []live.Window
		rejected bool
		none     bool
	}{
		{
			name: "anthropic subscription, allowed",
			h: header(
				"anthropic-ratelimit-unified-status", "allowed",
				"anthropic-ratelimit-unified-5h-status", "allowed",
				"anthropic-ratelimit-unified-5h-reset", "1789621200",
				"anthropic-ratelimit-unified-5h-utilization", "0.42",
				"anthropic-ratelimit-unified-7d-status", "allowed",
				"anthropic-ratelimit-unified-7d-reset", "1790140800",
				"anthropic-ratelimit-unified-7d-utilization", "0.3",
				"anthropic-ratelimit-unified-representative-claim", "five_hour",
				"anthropic-ratelimit-unified-fallback-percentage", "0.5",
				"anthropic-ratelimit-unified-reset", "1789621200",
			),
			want: []live.Window{
				{Name: "5h", Used: 0.42, ResetsAt: time.Unix(1789621200, 0).UTC()},
				{Name: "7d", Used: 0.3, ResetsAt: time.Unix(1790140800, 0).UTC()},
			},
		},
		{
			name: "anthropic rejected, RFC 3339 reset",
			h: header(
				"anthropic-ratelimit-unified-status", "rejected",
				"anthropic-ratelimit-unified-5h-status", "rejected",
				"anthropic-ratelimit-unified-5h-utilization", "1.02",
				"anthropic-ratelimit-unified-5h-reset", "2026-09-17T09:13:32Z",
			),
			want:     []live.Window{{Name: "5h", Used: 1, ResetsAt: time.Date(2026, 9, 17, 9, 13, 32, 0, time.UTC)}},
			rejected: true,
		},
		{
			name: "codex",
			h: header(
				"x-codex-primary-used-percent", "19.0",
				"x-codex-primary-window-minutes", "300",
				"x-codex-primary-reset-after-seconds", "13523",
				"x-codex-secondary-used-percent", "36",
				"x-codex-secondary-window-minutes", "10080",
				"x-codex-secondary-reset-after-seconds", "345600",
				"x-codex-primary-over-secondary-limit-percent", "0",
			),
			want: []live.Window{
				{Name: "5h", Used: 0.19, ResetsAt: now.Add(13523 * time.Second)},
				{Name: "7d", Used: 0.36, ResetsAt: now.Add(345600 * time.Second)},
			},
		},
		{
			name: "codex without window minutes, bad second value",
			h:    header("x-codex-primary-used-percent", "100", "x-codex-secondary-used-percent", "lots"),
			want: []live.Window{{Name: "primary", Used: 1}},
		},
		{name: "an API key's answer", h: header("anthropic-ratelimit-requests-remaining", "49", "x-ratelimit-remaining-tokens", "1000"), none: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, ok := ParseWindows(tt.h, now)
			if ok == tt.none {
				t.Fatalf("ok = %v, want %v", ok, !tt.none)
			}
			if tt.none {
				return
			}
			if diff := cmp.Diff(tt.want, w.List[:w.N]); diff != "" {
				t.Errorf("windows mismatch (-want +got):\n%s", diff)
			}
			if w.Rejected != tt.rejected {
				t.Errorf("rejected = %v, want %v", w.Rejected, tt.rejected)
			}
		})
	}
}

// TestWindowsCooling: a connection cools until the reset of a window used
// up or an answer saying rejected; windows past their reset count as unused.
func TestWindowsCooling(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_789_600_000, 0).UTC()
	reset := now.Add(2 * time.Hour)
	h := NewConn(BreakerConfig{})
	if until, seen := h.ObserveWindows(header("anthropic-ratelimit-unified-5h-utilization", "0.92"), now); !seen || !until.IsZero() {
		t.Fatalf("0.92 used: until %v seen %v; want seen and no cooldown", until, seen)
	}
	if got := h.WindowUsed(now); got != 0.92 {
		t.Errorf("WindowUsed = %v, want 0.92", got)
	}
	sec := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	until, _ := h.ObserveWindows(header("anthropic-ratelimit-unified-status", "rejected",
		"anthropic-ratelimit-unified-5h-utilization", "0.97", "anthropic-ratelimit-unified-5h-reset", sec(reset)), now)
	if !until.Equal(reset) {
		t.Errorf("rejected: cools until %v, want the window's reset %v", until, reset)
	}
	until, _ = h.ObserveWindows(header("x-codex-primary-used-percent", "100", "x-codex-primary-reset-after-seconds", "60",
		"x-codex-secondary-used-percent", "100", "x-codex-secondary-reset-after-seconds", "30"), now)
	if want := now.Add(30 * time.Second); !until.Equal(want) {
		t.Errorf("two windows used up: cools until %v, want the earlier reset %v", until, want)
	}
	if got := h.WindowUsed(now.Add(time.Minute)); got != 0 {
		t.Errorf("after both resets WindowUsed = %v, want 0", got)
	}
	if ws := h.Windows(now.Add(45 * time.Second)); len(ws) != 2 || ws[0].Used != 1 || ws[1].Used != 0 {
		t.Errorf("Windows between the resets = %+v, want the first still full, the second reset", ws)
	}
	if _, seen := h.ObserveWindows(http.Header{}, now); seen {
		t.Error("an answer without windows was seen as reporting some")
	}
	if ws := h.Windows(now); len(ws) != 2 {
		t.Errorf("an answer without windows forgot the latest ones: %+v", ws)
	}
}
