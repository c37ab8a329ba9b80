package web

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBuildOverview(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	old := []GateStat{
		{Key: "global", Level: LevelGlobal, Cap: 100},
		{Key: "connection:c1", Level: LevelConnection, Cap: 4, Admitted: 10, WaitMsTotal: 1000},
		{Key: "model:c1:glm-5", Level: LevelModel, Cap: 1, Timeouts: 5, QueueFull: 1},
	}
	mid := []GateStat{
		{Key: "global", Level: LevelGlobal, Cap: 100, InFlight: 1},
		{Key: "connection:c1", Level: LevelConnection, Cap: 4, InFlight: 2, Admitted: 15, WaitMsTotal: 2000},
		{Key: "model:c1:glm-5", Level: LevelModel, Cap: 1, InFlight: 1, Queued: 2, Timeouts: 7, QueueFull: 1},
	}
	cur := []GateStat{
		{Key: "global", Level: LevelGlobal, Cap: 100, InFlight: 4},
		{Key: "provider:zai", Level: LevelProvider, Cap: 8, InFlight: 3},
		{Key: "provider:openai", Level: LevelProvider, Cap: 0, InFlight: 1},
		{Key: "connection:c1", Level: LevelConnection, Cap: 4, InFlight: 3, Queued: 1, Admitted: 20, WaitMsTotal: 5000},
		{Key: "model:c1:glm-5", Level: LevelModel, Cap: 1, InFlight: 1, Queued: 6, Timeouts: 9, QueueFull: 2},
		{Key: "model:c1:glm-4.7", Level: LevelModel, Cap: 3, InFlight: 2},
		{Key: "connection:c2", Level: LevelConnection, Cap: 0, InFlight: 1},
	}
	ov := BuildOverview(OverviewInput{
		Now:   now,
		Gates: cur,
		History: []GateSnapshot{
			{At: now.Add(-90 * time.Second), Gates: old},
			{At: now.Add(-60 * time.Second), Gates: mid},
		},
		Connections: []ConnectionStatus{
			{ID: "c1", Name: "zai-main", Provider: "zai", Enabled: true, Health: HealthOK},
			{ID: "c2", Name: "openai-team", Provider: "openai", Enabled: true, Health: HealthCooling},
			{ID: "c3", Name: "off", Provider: "zai", Enabled: false, Health: HealthOK},
		},
		LiveURL: "/live",
	})

	wantSummary := Summary{InFlight: 4, Queued: 7, RejectedLastMinute: 3}
	if diff := cmp.Diff(wantSummary, ov.Summary); diff != "" {
		t.Errorf("summary mismatch (-want +got):\n%s", diff)
	}
	if ov.LiveIntervalMs != 2000 || ov.LiveURL != "/live" {
		t.Errorf("live = %q every %d ms", ov.LiveURL, ov.LiveIntervalMs)
	}
	if len(ov.Global) != 1 || ov.Global[0].Key != "global" {
		t.Fatalf("global gates = %+v", ov.Global)
	}
	if ov.GlobalBottleneck != "" {
		t.Errorf("global bottleneck = %q with nobody waiting on it", ov.GlobalBottleneck)
	}

	keys := func(b ConnectionBlock) []string {
		var out []string
		for _, g := range b.Gates {
			out = append(out, g.Key)
		}
		return out
	}
	tests := []struct {
		name           string
		block          ConnectionBlock
		wantKeys       []string
		wantBottleneck string
		wantHealth     string
	}{
		{
			name:           "capped provider on top, models sorted",
			block:          ov.Connections[0],
			wantKeys:       []string{"provider:zai", "connection:c1", "model:c1:glm-4.7", "model:c1:glm-5"},
			wantBottleneck: "model:c1:glm-5",
			wantHealth:     HealthOK,
		},
		{
			name:       "uncapped provider left out",
			block:      ov.Connections[1],
			wantKeys:   []string{"connection:c2"},
			wantHealth: HealthCooling,
		},
		{
			name:       "missing connection gate drawn empty; disabled",
			block:      ov.Connections[2],
			wantKeys:   []string{"provider:zai", "connection:c3"},
			wantHealth: HealthDisabled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.wantKeys, keys(tt.block)); diff != "" {
				t.Errorf("gate keys mismatch (-want +got):\n%s", diff)
			}
			if tt.block.Bottleneck != tt.wantBottleneck {
				t.Errorf("bottleneck = %q, want %q", tt.block.Bottleneck, tt.wantBottleneck)
			}
			if tt.block.Health != tt.wantHealth {
				t.Errorf("health = %q, want %q", tt.block.Health, tt.wantHealth)
			}
		})
	}

	glm5 := ov.Connections[0].Gates[3]
	if glm5.Label != "glm-5" {
		t.Fatalf("label = %q", glm5.Label)
	}
	if glm5.RejectedLastMinute != 3 {
		t.Errorf("glm-5 rejected in last minute = %d, want 3 (11 now − 8 a minute ago)", glm5.RejectedLastMinute)
	}
	if glm5.State() != StateRejecting {
		t.Errorf("glm-5 state = %q", glm5.State())
	}
	wantSamples := []Sample{{InFlight: 0, Queued: 0}, {InFlight: 1, Queued: 2}, {InFlight: 1, Queued: 6}}
	if diff := cmp.Diff(wantSamples, glm5.Samples); diff != "" {
		t.Errorf("samples mismatch (-want +got):\n%s", diff)
	}
	conn := ov.Connections[0].Gates[1]
	if !conn.HasAvgWait || conn.AvgWait != 400*time.Millisecond {
		t.Errorf("avg wait = %v (%v), want 400ms: (5000−1000) ms over (20−10) admitted", conn.AvgWait, conn.HasAvgWait)
	}
}

func TestGateState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		g    GateBar
		want string
	}{
		{name: "idle", g: GateBar{GateStat: GateStat{Cap: 4, InFlight: 3}}, want: StateIdle},
		{name: "uncapped busy is idle", g: GateBar{GateStat: GateStat{InFlight: 30}}, want: StateIdle},
		{name: "full", g: GateBar{GateStat: GateStat{Cap: 4, InFlight: 4}}, want: StateFull},
		{name: "queueing", g: GateBar{GateStat: GateStat{Cap: 4, InFlight: 4, Queued: 1}}, want: StateQueueing},
		{name: "rejecting", g: GateBar{GateStat: GateStat{Cap: 4, InFlight: 4, Queued: 1}, RejectedLastMinute: 1}, want: StateRejecting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.g.State(); got != tt.want {
				t.Errorf("State = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSparkPoints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []int
		top    int
		want   string
	}{
		{name: "empty", want: ""},
		{name: "single point drawn flat", values: []int{1}, top: 1, want: "0.0,1.0 120.0,1.0"},
		{name: "rise", values: []int{0, 2, 4}, top: 4, want: "0.0,23.0 60.0,12.0 120.0,1.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := sparkPoints(tt.values, tt.top); got != tt.want {
				t.Errorf("sparkPoints = %q, want %q", got, tt.want)
			}
		})
	}
}
