package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// windowHeaders are the usage-window headers of one family: Anthropic's
// unified utilization (0–1) or Codex's used percent.
type windowHeaders func(used float64, status string, reset time.Time, now time.Time) http.Header

func anthropicWindow(used float64, status string, reset, _ time.Time) http.Header {
	h := http.Header{}
	h.Set("anthropic-ratelimit-unified-status", status)
	h.Set("anthropic-ratelimit-unified-5h-utilization", strconv.FormatFloat(used, 'f', -1, 64))
	h.Set("anthropic-ratelimit-unified-5h-reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("anthropic-ratelimit-unified-7d-utilization", "0.1")
	h.Set("anthropic-ratelimit-unified-7d-reset", strconv.FormatInt(reset.Add(96*time.Hour).Unix(), 10))
	return h
}

func codexWindow(used float64, status string, reset, now time.Time) http.Header {
	if status == "rejected" {
		used = 1
	}
	h := http.Header{}
	h.Set("x-codex-primary-used-percent", strconv.FormatFloat(used*100, 'f', -1, 64))
	h.Set("x-codex-primary-window-minutes", "300")
	h.Set("x-codex-primary-reset-after-seconds", strconv.FormatInt(int64(reset.Sub(now)/time.Second), 10))
	h.Set("x-codex-secondary-used-percent", "10")
	h.Set("x-codex-secondary-window-minutes", "10080")
	h.Set("x-codex-secondary-reset-after-seconds", "600000")
	return h
}

// TestUsageWindowsPlaceSessions: with accounts reporting 92 % and 20 % of
// their 5-hour window used, new sessions go to the one with headroom; at
// drainAtPercent 90 the fuller one takes no new session and its sessions
// move on their next turn; a rejected answer cools it until the window's
// reset (fake clock), after which it is chosen again. Both header families.
func TestUsageWindowsPlaceSessions(t *testing.T) {
	t.Parallel()
	for name, hdrs := range map[string]windowHeaders{"anthropic": anthropicWindow, "codex": codexWindow} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			e := newEnv(t, upstreamtest.Options{}, withClock(clock))
			full, roomy := e.anthropicConn("full", 8, true), e.anthropicConn("roomy", 8, true)
			e.gw.Apply(Config{Connections: []Connection{full, roomy}})
			ctx := testCtx(t)
			reset := clock.Now().Add(2 * time.Hour)
			report := func(id string, used float64, status string) {
				t.Helper()
				if err := e.up.SetKeyBehavior("acct-"+id, upstreamtest.Behavior{Header: hdrs(used, status, reset, clock.Now())}); err != nil {
					t.Fatal(err)
				}
			}
			sess := func(s string) []string { return []string{session.HeaderGatehouse, s} }
			report("full", 0.92, "allowed_warning")
			report("roomy", 0.20, "allowed")

			// Until an answer reports its windows, rotation places a
			// session; after both have answered once, headroom does.
			e.served(ctx, "warm-1", 1, sess("warm-1")...)
			e.served(ctx, "warm-2", 1, sess("warm-2")...)
			// A session bound to the full account before draining.
			var old string
			for i := range 4 {
				s := "old-" + strconv.Itoa(i)
				if e.served(ctx, s, 1, sess(s)...) == "conn-full" {
					old = s
				}
			}
			for i := range 6 {
				s := "new-" + strconv.Itoa(i)
				if got := e.served(ctx, s, 1, sess(s)...); got != "conn-roomy" {
					t.Errorf("new session %s went to %s, want conn-roomy (80 %% headroom against 8 %%)", s, got)
				}
			}

			// drainAtPercent 90: sessions bound to the 92 % account move.
			full.Overrides.DrainAtPercent = ptr(90)
			e.gw.Apply(Config{Connections: []Connection{full, roomy}})
			if old != "" {
				if got := e.served(ctx, old, 2, sess(old)...); got != "conn-roomy" {
					t.Errorf("session %s bound to the draining account stayed on %s", old, got)
				}
			}
			// When the roomy account fills past the full one, the draining
			// account may serve a new session but takes no binding.
			report("roomy", 0.94, "allowed_warning")
			e.served(ctx, "fill", 1, sess("fill")...)
			boundToFull := func() int {
				n := []int{0}
				e.gw.bindings.Counts([]string{"full"}, n)
				return n[0]
			}
			before := boundToFull()
			if got := e.served(ctx, "on-draining", 1, sess("on-draining")...); got != "conn-full" {
				t.Errorf("new session with 8 %% headroom against 6 %% went to %s, want conn-full", got)
			}
			if after := boundToFull(); after != before {
				t.Errorf("the draining account took a binding (%d → %d)", before, after)
			}
			report("roomy", 0.20, "allowed")
			e.served(ctx, "refresh", 1, sess("refresh")...)

			// rejected: the full account cools until the reset.
			full.Overrides.DrainAtPercent = nil
			e.gw.Apply(Config{Connections: []Connection{full, roomy}})
			report("full", 1, "rejected")
			report("roomy", 0.99, "allowed_warning")
			for i := range 4 {
				s := "rej-" + strconv.Itoa(i)
				e.served(ctx, s, 1, sess(s)...)
				if h := e.health("full"); h.Health == "cooling" {
					break
				}
			}
			h := e.health("full")
			if h.Health != "cooling" || !h.Until.Equal(reset) || h.Reason != "usage window" {
				t.Fatalf("after rejected: health %s until %v (%s), want cooling until %v (usage window)", h.Health, h.Until, h.Reason, reset)
			}
			before = int(e.up.Stats().ByKey["acct-full"].Requests)
			for i := range 3 {
				s := "cool-" + strconv.Itoa(i)
				if got := e.served(ctx, s, 1, sess(s)...); got != "conn-roomy" {
					t.Errorf("while cooling, %s went to %s", s, got)
				}
			}
			if after := int(e.up.Stats().ByKey["acct-full"].Requests); after != before {
				t.Errorf("the cooling account got %d requests", after-before)
			}
			// After the reset it is chosen again (its window has reset:
			// more headroom than 99 %).
			clock.Advance(2*time.Hour + time.Second)
			report("full", 0.01, "allowed")
			if got := e.served(ctx, "after-reset", 1, sess("after-reset")...); got != "conn-full" {
				t.Errorf("after the reset a new session went to %s, want conn-full", got)
			}
		})
	}
}

// TestUsageWindowsInLiveView: the windows of the latest answer show in the
// snapshot (and from there /api/v1/gates and the dashboard).
func TestUsageWindowsInLiveView(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, withClock(clock))
	e.gw.Apply(Config{Connections: []Connection{e.anthropicConn("a", 2, true)}})
	reset := clock.Now().Add(time.Hour)
	if err := e.up.SetDefault(upstreamtest.Behavior{Header: anthropicWindow(0.92, "allowed_warning", reset, clock.Now())}); err != nil {
		t.Fatal(err)
	}
	e.served(testCtx(t), "s", 1)
	ws := e.health("a").Windows
	if len(ws) != 2 || ws[0].Name != "5h" || ws[0].Used != 0.92 || !ws[0].ResetsAt.Equal(reset.Truncate(time.Second)) || ws[1].Name != "7d" {
		t.Errorf("windows = %+v", ws)
	}
}

// TestSessionMetrics: gatehouse_affinity_total counts what each request's
// choice did with its binding, and gatehouse_connection_window_used_ratio
// shows each account's windows.
func TestSessionMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, withClock(clock), func(o *Options) { o.Registerer = reg })
	e.gw.Apply(Config{Connections: []Connection{e.anthropicConn("a", 2, true)}})
	if err := e.up.SetDefault(upstreamtest.Behavior{Header: anthropicWindow(0.92, "allowed_warning", clock.Now().Add(time.Hour), clock.Now())}); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	for n := 1; n <= 3; n++ {
		e.served(ctx, "sys", n, session.HeaderGatehouse, "s1")
	}
	// A request is counted once its answer is out: wait for the last.
	waitFor(t, 5*time.Second, "the third request counted", func() bool {
		v, _ := metricValue(t, reg, "gatehouse_affinity_total", map[string]string{"result": "hit"})
		return v == 2
	})
	for _, tc := range []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"gatehouse_affinity_total", map[string]string{"result": "bound"}, 1},
		{"gatehouse_affinity_total", map[string]string{"result": "hit"}, 2},
		{"gatehouse_affinity_total", map[string]string{"result": "spilled"}, 0},
		{"gatehouse_connection_window_used_ratio", map[string]string{"connection": "conn-a", "window": "5h"}, 0.92},
		{"gatehouse_connection_window_used_ratio", map[string]string{"connection": "conn-a", "window": "7d"}, 0.1},
	} {
		got, ok := metricValue(t, reg, tc.metric, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.metric, tc.labels, got, ok, tc.want)
		}
	}
}
