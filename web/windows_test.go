package web

import (
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// TestUsageWindowsRender: the connection page shows each usage window's
// used share and when it resets, in both languages, and the affinity
// override fields; nothing shows for a connection that reports none.
func TestUsageWindowsRender(t *testing.T) {
	t.Parallel()
	ws := []live.Window{{Name: "5h", Used: 0.92, ResetsAt: testNow.Add(2*time.Hour + 10*time.Minute)}, {Name: "7d", Used: 0.2}}
	for _, tc := range []struct{ lang, used, resets string }{{"en", "92 % used", "resets in"}, {"pt-BR", "92 % usado", "renova em"}} {
		doc := render(t, ConnectionFormPage(testPage(tc.lang, RoleAdmin), ConnectionForm{ID: "c1", Windows: ws}))
		w5 := strings.Join(strings.Fields(byTestID(t, doc, "window-5h").Text()), " ")
		if !strings.Contains(w5, tc.used) || !strings.Contains(w5, tc.resets) {
			t.Errorf("%s: 5h window reads %q, want %q and %q", tc.lang, w5, tc.used, tc.resets)
		}
		if w7 := byTestID(t, doc, "window-7d").Text(); !strings.Contains(w7, "20 %") || strings.Contains(w7, tc.resets) {
			t.Errorf("%s: 7d window reads %q, want 20 %% and no reset", tc.lang, w7)
		}
		if doc.Find(`[data-testid="window-5h"].bad`).Length() != 0 {
			t.Errorf("%s: 92 %% drawn as bad", tc.lang)
		}
		if box := doc.Find(`input[type=checkbox][name=affinity]`); box.Length() != 1 || !box.Is("[checked]") {
			t.Errorf("%s: affinity checkbox missing or unticked by default", tc.lang)
		}
		if doc.Find(`input[name=drainAtPercent]`).Length() != 1 {
			t.Errorf("%s: no drainAtPercent field", tc.lang)
		}
	}
	doc := render(t, ConnectionFormPage(testPage("en", RoleAdmin), ConnectionForm{ID: "c1"}))
	if doc.Find(`[data-testid="windows"]`).Length() != 0 {
		t.Error("windows shown for a connection that reports none")
	}
	off := render(t, ConnectionFormPage(testPage("en", RoleAdmin), ConnectionForm{ID: "c1", Fields: ConnectionFields{AffinityOff: true}}))
	if off.Find(`input[type=checkbox][name=affinity]`).Is("[checked]") {
		t.Error("affinity off drawn ticked")
	}
	if _, open := byTestID(t, off, "advanced").Attr("open"); !open {
		t.Error("affinity off does not open the Advanced section")
	}
	set := render(t, SettingsPage(testPage("en", RoleAdmin), SettingsForm{}))
	for _, name := range []string{"affinityTtlMs", "maxAffinityBindings", "affinityMaxWaitMs"} {
		if set.Find(`input[name=`+name+`]`).Length() != 1 {
			t.Errorf("settings page has no %s field", name)
		}
	}
}

// TestOverviewShowsUsageWindows: the overview's connection block shows its
// usage windows, a nearly full one marked.
func TestOverviewShowsUsageWindows(t *testing.T) {
	t.Parallel()
	v := BuildOverview(OverviewInput{
		Now:   testNow,
		Gates: []live.Gate{{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Cap: 4, EffectiveCap: 4}},
		Connections: []ConnectionStatus{{Connection: live.Connection{ID: "c1", Name: "claude-max", Provider: "anthropic", Health: live.HealthOK,
			Windows: []live.Window{{Name: "5h", Used: 0.97, ResetsAt: testNow.Add(time.Hour)}, {Name: "7d", Used: 0.31}}}, Enabled: true}},
	})
	doc := render(t, OverviewPage(testPage("en", RoleAdmin), v))
	if got := strings.Join(strings.Fields(byTestID(t, doc, "window-5h").Text()), " "); !strings.HasPrefix(got, "5h 97 % used resets in") {
		t.Errorf("5h window reads %q", got)
	}
	if doc.Find(`[data-testid="window-5h"].bad`).Length() != 1 {
		t.Error("a 97 % window is not marked")
	}
	if got := byTestID(t, doc, "window-7d").Text(); !strings.Contains(got, "31 %") {
		t.Errorf("7d window reads %q", got)
	}
}
