package web

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// TestOverviewLearnedAndShadowGates: an adaptive gate reads "2 / 3 of 8, learned"
// with its bar and state against the learned cap; a shadow gate is drawn dashed,
// after the real ones, with "would have queued N" and its peak, and counts in
// neither the summary nor the bottleneck.
func TestOverviewLearnedAndShadowGates(t *testing.T) {
	t.Parallel()
	v := BuildOverview(OverviewInput{
		Now: testNow,
		Gates: []live.Gate{
			{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Cap: 8, EffectiveCap: 3, Adaptive: true, InFlight: 3, Queued: 2},
			{Key: "model:c1:glm-5", Level: live.LevelModel, ConnectionID: "c1", Model: "glm-5", Cap: 4, EffectiveCap: 4, Adaptive: true, InFlight: 2},
			{Key: "shadow:connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Cap: 2, EffectiveCap: 2, Shadow: true,
				InFlight: 3, Queued: 0, WouldQueue: 17, PeakInFlight: 6},
			{Key: "shadow:model:c1:glm-5", Level: live.LevelModel, ConnectionID: "c1", Model: "glm-5", Cap: 1, EffectiveCap: 1, Shadow: true,
				InFlight: 2, WouldQueue: 1, PeakInFlight: 2},
		},
		Connections: []ConnectionStatus{{Connection: live.Connection{ID: "c1", Name: "zai-main", Provider: "zai", Health: live.HealthOK}, Enabled: true}},
	})
	if v.Summary.InFlight != 3 || v.Summary.Queued != 2 {
		t.Errorf("summary %d in flight, %d queued; want 3, 2 (shadow gates left out)", v.Summary.InFlight, v.Summary.Queued)
	}
	if n := len(v.Connections[0].Gates); n != 2 {
		t.Errorf("%d real gate bars, want 2", n)
	}
	doc := render(t, OverviewPage(testPage("en", RoleAdmin), v))
	conn := byTestID(t, doc, "gate-connection:c1")
	if got := text(conn.Find(`[data-testid="ratio"]`)); got != "3 / 3 of 8, learned" {
		t.Errorf("adaptive ratio = %q, want %q", got, "3 / 3 of 8, learned")
	}
	if got := conn.AttrOr("data-state", ""); got != StateQueueing {
		t.Errorf("adaptive gate state = %q, want queueing", got)
	}
	if got := conn.Find(`[data-f="fill"]`).AttrOr("width", ""); got != "100%" {
		t.Errorf("adaptive bar = %q, want full against the learned cap", got)
	}
	sh := byTestID(t, doc, "gate-shadow:connection:c1")
	if !sh.HasClass("shadow") {
		t.Errorf("shadow gate not drawn as a shadow: class %q", sh.AttrOr("class", ""))
	}
	for id, want := range map[string]string{"ratio": "3 / 2", "would-queue": "would have queued 17", "peak": "peak 6"} {
		if got := text(sh.Find(`[data-testid="` + id + `"]`)); got != want {
			t.Errorf("shadow %s = %q, want %q", id, got, want)
		}
	}
	if got := text(byTestID(t, doc, "gate-shadow:model:c1:glm-5").Find(".gate-name")); got != "shadow · glm-5" {
		t.Errorf("shadow model gate name = %q", got)
	}
	if sh.Find(`[data-testid="bottleneck"]`).Length() != 0 {
		t.Error("a shadow gate carries a bottleneck mark")
	}
}
