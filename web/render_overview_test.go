package web

import (
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

func sampleOverview() Overview {
	// A minute ago connection c1 had admitted 10 requests at once; since, 96 more
	// waited (256 ms, 512 ms] and 4 waited (1.024 s, 2.048 s]: p50 is rank 50 of
	// 100, 256 ms + 256 ms × 50/96 ≈ 389 ms; p99 is rank 99, the third of the
	// four slow ones, 1.024 s + 1.024 s × 3/4 = 1.792 s.
	return BuildOverview(OverviewInput{
		Now: testNow,
		History: []GateSnapshot{{At: testNow.Add(-time.Minute), Gates: []live.Gate{
			{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Cap: 4, Admitted: 10, Waits: live.WaitHistogram{0: 10}},
		}}},
		Gates: []live.Gate{
			{Key: "global", Level: live.LevelGlobal, Cap: 200, InFlight: 142},
			{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Cap: 4, InFlight: 3, Queued: 0,
				Admitted: 110, Waits: live.WaitHistogram{0: 10, 10: 96, 12: 4}},
			{Key: "model:c1:glm-5", Level: live.LevelModel, ConnectionID: "c1", Model: "glm-5", Cap: 1, InFlight: 1, Queued: 6},
			{Key: "model:c1:glm-4.7", Level: live.LevelModel, ConnectionID: "c1", Model: "glm-4.7", Cap: 3, InFlight: 2},
			{Key: "connection:c2", Level: live.LevelConnection, ConnectionID: "c2", Cap: 0, InFlight: 0},
		},
		Connections: []ConnectionStatus{
			{Connection: live.Connection{ID: "c1", Name: "zai-main", Provider: "zai", Health: live.HealthOK,
				Budgets: map[string]live.Budget{live.BudgetRPM: {Limit: 60, Remaining: 58, ResetAt: testNow.Add(40 * time.Second)}}}, Enabled: true},
			{Connection: live.Connection{ID: "c2", Name: "openai-team", Provider: "openai", Health: live.HealthCooling, Until: testNow.Add(12 * time.Second), Reason: "429 from upstream"}, Enabled: true},
		},
		LiveURL: "/live",
	})
}

func TestOverviewPage(t *testing.T) {
	t.Parallel()
	doc := render(t, OverviewPage(testPage("en", RoleAdmin), sampleOverview()))
	ov := byTestID(t, doc, "overview")
	if got := ov.AttrOr("data-live-url", ""); got != "/live" {
		t.Errorf("data-live-url = %q", got)
	}
	summary := text(byTestID(t, doc, "summary"))
	if want := "Right now 3 in flight · 6 queued · 0 rejected in the last minute · 0 errors in the last minute · p99 wait 1.8 s over the last minute"; summary != want {
		t.Errorf("summary = %q, want %q", summary, want)
	}
	tests := []struct {
		key        string
		wantRatio  string
		wantQueued string
		wantState  string
		bottleneck bool
	}{
		{key: "global", wantRatio: "142 / 200", wantQueued: "0", wantState: "in use"},
		{key: "connection:c1", wantRatio: "3 / 4", wantQueued: "0", wantState: "in use"}, // 3 of 4 is not idle

		{key: "model:c1:glm-5", wantRatio: "1 / 1", wantQueued: "6", wantState: "queueing", bottleneck: true},
		{key: "model:c1:glm-4.7", wantRatio: "2 / 3", wantQueued: "0", wantState: "in use"},
		{key: "connection:c2", wantRatio: "0 / –", wantQueued: "0", wantState: "idle"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			row := byTestID(t, doc, "gate-"+tt.key)
			if got := row.AttrOr("data-gate", ""); got != tt.key {
				t.Errorf("data-gate = %q", got)
			}
			if got := text(row.Find(`[data-testid="ratio"]`)); got != tt.wantRatio {
				t.Errorf("ratio = %q, want %q", got, tt.wantRatio)
			}
			if got := text(row.Find(`[data-testid="queued"]`)); got != tt.wantQueued {
				t.Errorf("queued = %q, want %q", got, tt.wantQueued)
			}
			// colour never alone: the state is written in words
			if got := text(row.Find(`[data-testid="state"]`)); !strings.Contains(got, tt.wantState) {
				t.Errorf("state = %q, want %q", got, tt.wantState)
			}
			visible := row.Find(`[data-testid="bottleneck"]:not([hidden])`).Length() == 1
			if visible != tt.bottleneck {
				t.Errorf("bottleneck mark shown = %v, want %v", visible, tt.bottleneck)
			}
			if row.Find(`svg[data-testid="spark"] polyline`).Length() != 2 {
				t.Errorf("sparkline missing")
			}
		})
	}
	// the connection gate carries its wait percentiles, as UX.md draws them; a gate
	// with no admission in the window, and the model gates, carry none
	if got := text(byTestID(t, doc, "gate-connection:c1").Find(`[data-testid="wait"]`)); got != "wait p50 0.4 s p99 1.8 s over the last minute" {
		t.Errorf("connection:c1 wait = %q, want %q", got, "wait p50 0.4 s p99 1.8 s over the last minute")
	}
	for _, key := range []string{"connection:c2", "model:c1:glm-5", "global"} {
		if n := byTestID(t, doc, "gate-"+key).Find(`[data-testid="wait"]`).Length(); n != 0 {
			t.Errorf("%s shows a wait line with no admission in the window", key)
		}
	}
	if got := byTestID(t, doc, "gate-connection:c1").Find(`[data-f="fill"]`).AttrOr("width", ""); got != "75%" {
		t.Errorf("bar width = %q, want 75%%", got)
	}
	c2 := byTestID(t, doc, "conn-c2")
	if got := text(c2.Find(`[data-testid="health"]`)); got != "◐ cooling 12 s (429 from upstream)" {
		t.Errorf("health = %q", got)
	}
	if got := text(byTestID(t, doc, "budget-rpm")); got != "requests/min 58 of 60 left resets in 40 s" {
		t.Errorf("budget = %q", got)
	}
	// the global gate is drawn once, above the connections
	if n := doc.Find(`[data-gate="global"]`).Length(); n != 1 {
		t.Errorf("global gate drawn %d times", n)
	}
}

func TestOverviewEmpty(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		role     string
		wantLink bool
	}{
		{name: "admin", role: RoleAdmin, wantLink: true},
		{name: "viewer", role: RoleViewer, wantLink: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := render(t, OverviewPage(testPage("en", tt.role), Overview{}))
			empty := byTestID(t, doc, "empty")
			if got := text(empty); !strings.Contains(got, "No connections yet") || !strings.Contains(got, "gatehouse serve --demo") {
				t.Errorf("empty state = %q", got)
			}
			if got := empty.Find(`a[href="/connections/new"]`).Length() == 1; got != tt.wantLink {
				t.Errorf("add link shown = %v, want %v", got, tt.wantLink)
			}
			if _, live := byTestID(t, doc, "overview").Attr("data-live-url"); live {
				t.Errorf("live refresh on without a LiveURL")
			}
		})
	}
}
