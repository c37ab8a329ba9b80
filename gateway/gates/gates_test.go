package gates

import (
	"reflect"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/health"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

func TestPath(t *testing.T) {
	p := Path("zai", "c1", "glm-5")
	want := []string{"global", "provider:zai", "connection:c1", "model:c1:glm-5"}
	levels := []string{live.LevelGlobal, live.LevelProvider, live.LevelConnection, live.LevelModel}
	if len(p) != len(want) {
		t.Fatalf("%d gates", len(p))
	}
	for i, g := range p {
		if g.Key != want[i] || g.Level != levels[i] {
			t.Errorf("gate %d: %+v, want %s at %s", i, g, want[i], levels[i])
		}
	}
}

func TestSpec(t *testing.T) {
	eff := limits.Settings{GlobalMaxConcurrent: new(40), Providers: map[string]limits.ProviderSettings{
		"zai": {MaxConcurrent: new(8)}, "openai": {}}}.Effective()
	sp := NewSpec(eff)
	sp.AddConnection("plain", limits.Overrides{})
	sp.AddConnection("capped", limits.Overrides{MaxConcurrent: new(3), ModelConcurrency: map[string]int{"glm-5": 1, "off": 0},
		Shadow: &limits.ShadowCaps{MaxConcurrent: new(2), ModelConcurrency: map[string]int{"glm-5": 1}}})
	sp.AddConnection("learns", limits.Overrides{MaxConcurrent: new(6), ModelConcurrency: map[string]int{"m": 2}, Adaptive: new(true)})
	sp.AddConnection("learns-uncapped", limits.Overrides{Adaptive: new(true)})

	wantCaps := map[string]int{"global": 40, "provider:zai": 8, "connection:plain": 0, "connection:capped": 3, "model:capped:glm-5": 1,
		"connection:learns": 6, "model:learns:m": 2, "connection:learns-uncapped": 0}
	if len(sp.Caps) != len(wantCaps) {
		t.Errorf("caps %v, want %v", sp.Caps, wantCaps)
	}
	for k, v := range wantCaps {
		if got, ok := sp.Caps[k]; !ok || got != v {
			t.Errorf("cap of %s = %d (set %v), want %d", k, got, ok, v)
		}
	}
	wantShadow := map[string]health.ShadowSpec{"shadow:connection:capped": {ConnID: "capped", Cap: 2},
		"shadow:model:capped:glm-5": {ConnID: "capped", Model: "glm-5", Cap: 1}}
	if len(sp.Shadow) != len(wantShadow) {
		t.Errorf("shadow gates %v", sp.Shadow)
	}
	for k, v := range wantShadow {
		if sp.Shadow[k] != v {
			t.Errorf("shadow %s = %+v, want %+v", k, sp.Shadow[k], v)
		}
	}
	wantLearn := map[string]health.LearnSpec{"connection:learns": {ConnID: "learns", Level: live.LevelConnection, Cap: 6},
		"model:learns:m": {ConnID: "learns", Level: live.LevelModel, Cap: 2}}
	if len(sp.Learn) != len(wantLearn) {
		t.Errorf("learning gates %v: an adaptive connection without a cap learns nothing", sp.Learn)
	}
	for k, v := range wantLearn {
		if sp.Learn[k] != v {
			t.Errorf("learning %s = %+v, want %+v", k, sp.Learn[k], v)
		}
	}
}

func TestIdentity(t *testing.T) {
	configured := map[string]string{"c1": "zai", "team:a": "openai"}
	provider := func(id string) (string, bool) { p, ok := configured[id]; return p, ok }
	for _, tc := range []struct {
		key, level string
		provider   func(string) (string, bool)
		want       live.Gate
	}{
		{"global", live.LevelGlobal, provider, live.Gate{Key: "global", Level: live.LevelGlobal}},
		{"provider:zai", live.LevelProvider, provider, live.Gate{Key: "provider:zai", Level: live.LevelProvider, Provider: "zai"}},
		{"connection:c1", live.LevelConnection, provider, live.Gate{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Provider: "zai"}},
		{"connection:gone", live.LevelConnection, provider, live.Gate{Key: "connection:gone", Level: live.LevelConnection, ConnectionID: "gone"}},
		{"model:c1:llama3:8b", live.LevelModel, provider, live.Gate{Key: "model:c1:llama3:8b", Level: live.LevelModel, ConnectionID: "c1", Model: "llama3:8b", Provider: "zai"}},
		{"model:team:a:gpt-x", live.LevelModel, provider, live.Gate{Key: "model:team:a:gpt-x", Level: live.LevelModel, ConnectionID: "team:a", Model: "gpt-x", Provider: "openai"}},
		{"model:team:a:gpt-x", live.LevelModel, nil, live.Gate{Key: "model:team:a:gpt-x", Level: live.LevelModel, ConnectionID: "team", Model: "a:gpt-x"}},
	} {
		if got := Identity(tc.key, tc.level, tc.provider); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Identity(%q) = %+v, want %+v", tc.key, got, tc.want)
		}
	}
}

// TestLive: admission's stats become live gates with their identity and
// counters; an idle uncapped gate is left out unless it is a connection's;
// an adaptive gate shows its configured cap and the learned one in force.
func TestLive(t *testing.T) {
	stats := []admission.GateStats{
		{Key: "global", Level: live.LevelGlobal},
		{Key: "provider:zai", Level: live.LevelProvider, InFlight: 1},
		{Key: "connection:c1", Level: live.LevelConnection},
		{Key: "model:c1:glm-5", Level: live.LevelModel, Cap: 2, InFlight: 2, Queued: 3, Admitted: 9, Timeouts: 1,
			QueuedByClient:   map[string]int{"k": 3},
			QueuedByPriority: map[admission.Priority]int{admission.PriorityBatch: 3, admission.PriorityStandard: 0}},
		{Key: "connection:c2", Level: live.LevelConnection, Cap: 3},
	}
	provider := func(id string) (string, bool) { return "zai", id == "c1" || id == "c2" }
	got := Live(stats, map[string]int{"connection:c2": 6}, provider)
	keys := make([]string, 0, len(got))
	for _, g := range got {
		keys = append(keys, g.Key)
	}
	if !reflect.DeepEqual(keys, []string{"provider:zai", "connection:c1", "model:c1:glm-5", "connection:c2"}) {
		t.Fatalf("gates %v: the idle uncapped global gate is left out, the others kept in order", keys)
	}
	m := got[2]
	if m.ConnectionID != "c1" || m.Model != "glm-5" || m.Provider != "zai" || m.Cap != 2 || m.EffectiveCap != 2 || m.Queued != 3 ||
		m.Admitted != 9 || m.Timeouts != 1 || m.QueuedByClient["k"] != 3 || !reflect.DeepEqual(m.QueuedByPriority, map[string]int{"batch": 3}) {
		t.Fatalf("model gate %+v", m)
	}
	if c2 := got[3]; !c2.Adaptive || c2.Cap != 6 || c2.EffectiveCap != 3 {
		t.Fatalf("adaptive gate %+v: configured 6, learned 3 in force", c2)
	}
}
