package health

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// Usage windows (DESIGN.md, "Sessions: usage windows"): subscription-style
// accounts report how much of their 5-hour and 7-day windows is used on
// every answer. Anthropic sends anthropic-ratelimit-unified-5h-utilization
// and -7d-utilization (0–1) with -5h-reset and -7d-reset (epoch seconds)
// and anthropic-ratelimit-unified-status (allowed, allowed_warning,
// rejected); Codex sends x-codex-primary-used-percent and
// x-codex-secondary-used-percent (0–100) with -window-minutes and
// -reset-after-seconds. Conn keeps the windows of the latest answer that
// reported any; the gateway orders new sessions by headroom, drains a
// connection at its drainAtPercent and cools it until the reset at 100 %
// or "rejected".

// ReasonUsageWindow is the health reason of a cooldown after a usage window
// ran out.
const ReasonUsageWindow = "usage window"

// maxWindows bounds the windows kept per connection.
const maxWindows = 4

// Windows is what one answer's headers say of the account's usage windows.
type Windows struct {
	List [maxWindows]live.Window
	N    int
	// Rejected: the upstream said the account is refused until a reset
	// (anthropic-ratelimit-unified-status: rejected).
	Rejected bool
	// Reset is the account-wide reset an answer named
	// (anthropic-ratelimit-unified-reset), zero when none.
	Reset time.Time
}

// Canonical header names, so that the maps are indexed without canonicalising.
const (
	hdrUnifiedStatus = "Anthropic-Ratelimit-Unified-Status"
	hdrUnifiedReset  = "Anthropic-Ratelimit-Unified-Reset"
)

var anthropicWindows = [...]struct{ name, util, reset, status string }{
	{"5h", "Anthropic-Ratelimit-Unified-5h-Utilization", "Anthropic-Ratelimit-Unified-5h-Reset", "Anthropic-Ratelimit-Unified-5h-Status"},
	{"7d", "Anthropic-Ratelimit-Unified-7d-Utilization", "Anthropic-Ratelimit-Unified-7d-Reset", "Anthropic-Ratelimit-Unified-7d-Status"},
}

var codexWindows = [...]struct{ name, used, minutes, after, at string }{
	{"primary", "X-Codex-Primary-Used-Percent", "X-Codex-Primary-Window-Minutes", "X-Codex-Primary-Reset-After-Seconds", "X-Codex-Primary-Reset-At"},
	{"secondary", "X-Codex-Secondary-Used-Percent", "X-Codex-Secondary-Window-Minutes", "X-Codex-Secondary-Reset-After-Seconds", "X-Codex-Secondary-Reset-At"},
}

// ParseWindows reads the usage windows of both header families from h at
// now; ok is false when h reports none (the common case costs a few map
// lookups). A value that does not parse leaves its window out; used
// fractions are clamped to 0–1.
func ParseWindows(h http.Header, now time.Time) (w Windows, ok bool) {
	if v := h[hdrUnifiedStatus]; len(v) > 0 {
		ok = true
		w.Rejected = v[0] == "rejected"
		if r := h[hdrUnifiedReset]; len(r) > 0 {
			w.Reset = parseEpoch(r[0])
		}
	}
	for _, a := range anthropicWindows {
		v := h[a.util]
		if len(v) == 0 {
			continue
		}
		used, err := strconv.ParseFloat(v[0], 64)
		if err != nil || math.IsNaN(used) {
			continue
		}
		win := live.Window{Name: a.name, Used: clamp01(used)}
		if r := h[a.reset]; len(r) > 0 {
			win.ResetsAt = parseEpoch(r[0])
		}
		if s := h[a.status]; len(s) > 0 && s[0] == "rejected" {
			win.Used = 1
		}
		w.add(win)
		ok = true
	}
	for _, c := range codexWindows {
		v := h[c.used]
		if len(v) == 0 {
			continue
		}
		pct, err := strconv.ParseFloat(v[0], 64)
		if err != nil || math.IsNaN(pct) {
			continue
		}
		win := live.Window{Name: c.name, Used: clamp01(pct / 100)}
		if m := h[c.minutes]; len(m) > 0 {
			if n, err := strconv.Atoi(m[0]); err == nil && n > 0 {
				win.Name = windowName(n)
			}
		}
		if s := h[c.after]; len(s) > 0 {
			if n, err := strconv.ParseFloat(s[0], 64); err == nil && n >= 0 && n < 1e9 {
				win.ResetsAt = now.Add(time.Duration(n * float64(time.Second)))
			}
		} else if s := h[c.at]; len(s) > 0 {
			win.ResetsAt = parseEpoch(s[0])
		}
		w.add(win)
		ok = true
	}
	return w, ok
}

func (w *Windows) add(win live.Window) {
	if w.N < maxWindows {
		w.List[w.N] = win
		w.N++
	}
}

// windowName names a window of n minutes as the dashboard shows it: "5h",
// "7d", "90m".
func windowName(n int) string {
	switch {
	case n%1440 == 0:
		return strconv.Itoa(n/1440) + "d"
	case n%60 == 0:
		return strconv.Itoa(n/60) + "h"
	}
	return strconv.Itoa(n) + "m"
}

// parseEpoch reads a reset instant: epoch seconds (whole or fractional) or
// RFC 3339; zero when it is neither.
func parseEpoch(v string) time.Time {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f <= 0 || f > 1e11 {
			return time.Time{}
		}
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC()
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC()
	}
	return time.Time{}
}

func clamp01(f float64) float64 { return min(max(f, 0), 1) }

// CoolUntil is when a connection whose answer reported w must cool until,
// zero when it need not: the earliest future reset of a window at 100 %; when
// the status is rejected with no window at 100 %, the account-wide reset,
// else the latest window reset; a refusal without any future reset cools
// for a minute.
func (w *Windows) CoolUntil(now time.Time) time.Time {
	var until time.Time
	for _, win := range w.List[:w.N] {
		if win.Used >= 1 && win.ResetsAt.After(now) && (until.IsZero() || win.ResetsAt.Before(until)) {
			until = win.ResetsAt
		}
	}
	full := false
	for _, win := range w.List[:w.N] {
		full = full || win.Used >= 1
	}
	if !until.IsZero() || (!w.Rejected && !full) {
		return until
	}
	if w.Reset.After(now) {
		return w.Reset
	}
	for _, win := range w.List[:w.N] {
		if win.ResetsAt.After(until) {
			until = win.ResetsAt
		}
	}
	if !until.After(now) {
		until = now.Add(time.Minute)
	}
	return until
}

// ObserveWindows keeps the windows h reports at now (the latest answer that
// reports any wins) and returns when the connection must cool until (zero:
// it need not); seen is false when h reports no window.
func (h *Conn) ObserveWindows(hdr http.Header, now time.Time) (until time.Time, seen bool) {
	w, ok := ParseWindows(hdr, now)
	if !ok {
		return time.Time{}, false
	}
	h.mu.Lock()
	h.windows = w
	h.mu.Unlock()
	return w.CoolUntil(now), true
}

// WindowUsed is the largest used fraction of the connection's windows at
// now: a window past its reset counts as 0, and so does a connection that
// reports none.
func (h *Conn) WindowUsed(now time.Time) float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var used float64
	for _, win := range h.windows.List[:h.windows.N] {
		if win.ResetsAt.IsZero() || win.ResetsAt.After(now) {
			used = max(used, win.Used)
		}
	}
	return used
}

// Windows returns the connection's windows at now, for the live view (nil
// when it reports none); a window past its reset shows 0 used.
func (h *Conn) Windows(now time.Time) []live.Window {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.windows.N == 0 {
		return nil
	}
	out := make([]live.Window, h.windows.N)
	copy(out, h.windows.List[:h.windows.N])
	for i := range out {
		if !out[i].ResetsAt.IsZero() && !out[i].ResetsAt.After(now) {
			out[i].Used = 0
		}
	}
	return out
}
