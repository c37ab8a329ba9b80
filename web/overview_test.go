package web

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

func TestBuildOverview(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	old := []live.Gate{
		{Key: "global", Level: live.LevelGlobal, Cap: 100},
		{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Cap: 4, Admitted: 10, WaitTotal: 1000 * time.Millisecond, Waits: live.WaitHistogram{0: 10}},
		{Key: "model:c1:glm-5", Level: live.LevelModel, ConnectionID: "c1", Model: "glm-5", Cap: 1, Timeouts: 5, QueueFull: 1},
	}
	mid := []live.Gate{
		{Key: "global", Level: live.LevelGlobal, Cap: 100, InFlight: 1},
		{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Cap: 4, InFlight: 2, Admitted: 15, WaitTotal: 2000 * time.Millisecond, Waits: live.WaitHistogram{0: 10, 10: 5}},
		{Key: "model:c1:glm-5", Level: live.LevelModel, ConnectionID: "c1", Model: "glm-5", Cap: 1, InFlight: 1, Queued: 2, Timeouts: 7, QueueFull: 1},
	}
	cur := []live.Gate{
		{Key: "global", Level: live.LevelGlobal, Cap: 100, InFlight: 4},
		{Key: "provider:zai", Level: live.LevelProvider, Provider: "zai", Cap: 8, InFlight: 3},
		{Key: "provider:openai", Level: live.LevelProvider, Provider: "openai", Cap: 0, InFlight: 1},
		{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Cap: 4, InFlight: 3, Queued: 1, Admitted: 20, WaitTotal: 5000 * time.Millisecond, Waits: live.WaitHistogram{0: 10, 10: 5, 12: 5}},
		{Key: "model:c1:glm-5", Level: live.LevelModel, ConnectionID: "c1", Model: "glm-5", Cap: 1, InFlight: 1, Queued: 6, Timeouts: 9, QueueFull: 2},
		{Key: "model:c1:glm-4.7", Level: live.LevelModel, ConnectionID: "c1", Model: "glm-4.7", Cap: 3, InFlight: 2},
		{Key: "connection:c2", Level: live.LevelConnection, ConnectionID: "c2", Cap: 0, InFlight: 1},
	}
	ov := BuildOverview(OverviewInput{
		Now:   now,
		Gates: cur,
		History: []GateSnapshot{
			{At: now.Add(-90 * time.Second), Gates: old},
			{At: now.Add(-60 * time.Second), Gates: mid},
		},
		Connections: []ConnectionStatus{
			{Connection: live.Connection{ID: "c1", Name: "zai-main", Provider: "zai", Health: live.HealthOK}, Enabled: true},
			{Connection: live.Connection{ID: "c2", Name: "openai-team", Provider: "openai", Health: live.HealthCooling}, Enabled: true},
			{Connection: live.Connection{ID: "c3", Name: "off", Provider: "zai", Health: live.HealthOK}, Enabled: false},
		},
		LiveURL: "/live",
	})

	// the last minute (mid → cur) admitted 5 through c1, all in (1.024 s, 2.048 s]:
	// rank 4.95 of 5 is 1.024 s + 1.024 s × 4.95/5
	wantSummary := Summary{InFlight: 4, Queued: 7, RejectedLastMinute: 3, P99Wait: 2037760 * time.Microsecond, HasP99Wait: true,
		WaitWindow: time.Minute}
	if diff := cmp.Diff(wantSummary, ov.Summary, approxDuration()); diff != "" {
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
			wantHealth:     live.HealthOK,
		},
		{
			name:       "uncapped provider left out",
			block:      ov.Connections[1],
			wantKeys:   []string{"connection:c2"},
			wantHealth: live.HealthCooling,
		},
		{
			// the gateway does not list c3's gate: drawn empty, without a key
			name:       "missing connection gate drawn empty; disabled",
			block:      ov.Connections[2],
			wantKeys:   []string{"provider:zai", ""},
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

	if g := ov.Connections[2].Gates[1]; g.Level != live.LevelConnection || g.ConnectionID != "c3" || g.InFlight != 0 || g.Cap != 0 {
		t.Errorf("c3's drawn-empty gate = %+v, want c3's empty connection gate", g.Gate)
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
	// the window (old → cur) admitted 10 through c1: 5 in (256 ms, 512 ms], 5 in
	// (1.024 s, 2.048 s]; rank 5 tops the first bucket, rank 9.9 is 4.9/5 into the second
	conn := ov.Connections[0].Gates[1]
	if !conn.HasWait || conn.WaitP50 != 512*time.Millisecond || !near(conn.WaitP99, 2027520*time.Microsecond) {
		t.Errorf("wait p50 %v p99 %v (%v), want 512ms and 2.02752s", conn.WaitP50, conn.WaitP99, conn.HasWait)
	}
	if conn.WaitWindow != 90*time.Second {
		t.Errorf("wait window %v, want 90s (the oldest sample to now)", conn.WaitWindow)
	}
}

// near reports whether a is within a microsecond of b: interpolation goes through floats.
func near(a, b time.Duration) bool { return a-b <= time.Microsecond && b-a <= time.Microsecond }

func approxDuration() cmp.Option {
	return cmp.Comparer(near)
}

// TestOverviewWaitPercentiles: the connection gates' wait percentiles come from the
// difference between the oldest history sample and now, the summary's p99 from the
// last minute summed over the connection gates only (a request passes one
// connection gate but also its model, provider and global gates).
func TestOverviewWaitPercentiles(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	conn := func(id string, w live.WaitHistogram) live.Gate {
		// web reads a gate's fields, never its key: any unique key will do
		return live.Gate{Key: id + "/connection", Level: live.LevelConnection, ConnectionID: id, Admitted: w.Count(), Waits: w}
	}
	model := func(id string, w live.WaitHistogram) live.Gate {
		return live.Gate{Key: id + "/model/m", Level: live.LevelModel, ConnectionID: id, Model: "m", Admitted: w.Count(), Waits: w}
	}
	tests := []struct {
		name    string
		history []GateSnapshot
		gates   []live.Gate
		// c1's window percentiles; zero values when not shown
		wantP50, wantP99 time.Duration
		wantHas          bool
		wantSummary      time.Duration
		wantSummaryHas   bool
	}{
		{
			// 100 waits in (2 ms, 4 ms] since the sample: p50 halfway, p99 at 99/100
			name:    "interpolated within a bucket",
			history: []GateSnapshot{{At: now.Add(-time.Minute), Gates: []live.Gate{conn("c1", live.WaitHistogram{0: 7, 3: 20})}}},
			gates:   []live.Gate{conn("c1", live.WaitHistogram{0: 7, 3: 120})},
			wantP50: 3 * time.Millisecond, wantP99: 3980 * time.Microsecond, wantHas: true,
			wantSummary: 3980 * time.Microsecond, wantSummaryHas: true,
		},
		{
			// 98 admitted at once and 2 in (1.024 s, 2.048 s]
			name:    "immediate admissions count as no wait",
			history: []GateSnapshot{{At: now.Add(-time.Minute), Gates: []live.Gate{conn("c1", live.WaitHistogram{})}}},
			gates:   []live.Gate{conn("c1", live.WaitHistogram{0: 98, 12: 2})},
			wantP50: 0, wantP99: 1536 * time.Millisecond, wantHas: true,
			wantSummary: 1536 * time.Millisecond, wantSummaryHas: true,
		},
		{
			name:    "no admission in the window: not shown",
			history: []GateSnapshot{{At: now.Add(-time.Minute), Gates: []live.Gate{conn("c1", live.WaitHistogram{0: 5, 12: 5})}}},
			gates:   []live.Gate{conn("c1", live.WaitHistogram{0: 5, 12: 5})},
		},
		{
			name:  "no history yet: not shown",
			gates: []live.Gate{conn("c1", live.WaitHistogram{0: 5, 12: 5})},
		},
		{
			// the window is 3 minutes, the summary's minute starts at the middle sample
			name: "summary looks at the last minute only",
			history: []GateSnapshot{
				{At: now.Add(-3 * time.Minute), Gates: []live.Gate{conn("c1", live.WaitHistogram{})}},
				{At: now.Add(-time.Minute), Gates: []live.Gate{conn("c1", live.WaitHistogram{19: 50})}},
			},
			gates: []live.Gate{conn("c1", live.WaitHistogram{3: 100, 19: 50})},
			// the window: 100 in (2 ms, 4 ms], 50 unbounded; rank 75 is 3/4 into the first
			wantP50: 3500 * time.Microsecond, wantP99: 131072 * time.Millisecond, wantHas: true,
			wantSummary: 3980 * time.Microsecond, wantSummaryHas: true,
		},
		{
			// c2 adds 100 immediate admissions; the model gate's slow waits are the
			// same requests as c1's and must not be counted twice
			name: "summary sums connection gates, not model gates",
			history: []GateSnapshot{{At: now.Add(-time.Minute), Gates: []live.Gate{
				conn("c1", live.WaitHistogram{}), conn("c2", live.WaitHistogram{}), model("c1", live.WaitHistogram{}),
			}}},
			gates: []live.Gate{
				conn("c1", live.WaitHistogram{12: 4}),
				conn("c2", live.WaitHistogram{0: 96}),
				model("c1", live.WaitHistogram{12: 4}),
			},
			wantP50: 1536 * time.Millisecond, wantP99: 2037760 * time.Microsecond, wantHas: true,
			// rank 99 of 100: the third of the four slow ones
			wantSummary: 1792 * time.Millisecond, wantSummaryHas: true,
		},
		{
			// the gate was dropped and made anew: its counts restarted below the sample's
			name:    "counter reset keeps the newer counts",
			history: []GateSnapshot{{At: now.Add(-time.Minute), Gates: []live.Gate{conn("c1", live.WaitHistogram{0: 500, 3: 500})}}},
			gates:   []live.Gate{conn("c1", live.WaitHistogram{3: 100})},
			wantP50: 3 * time.Millisecond, wantP99: 3980 * time.Microsecond, wantHas: true,
			wantSummary: 3980 * time.Microsecond, wantSummaryHas: true,
		},
		{
			name:    "a connection new since the sample counts from zero",
			history: []GateSnapshot{{At: now.Add(-time.Minute), Gates: nil}},
			gates:   []live.Gate{conn("c1", live.WaitHistogram{3: 100})},
			wantP50: 3 * time.Millisecond, wantP99: 3980 * time.Microsecond, wantHas: true,
			wantSummary: 3980 * time.Microsecond, wantSummaryHas: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ov := BuildOverview(OverviewInput{
				Now: now, Gates: tt.gates, History: tt.history,
				Connections: []ConnectionStatus{{Connection: live.Connection{ID: "c1", Name: "one", Provider: "p"}, Enabled: true}},
			})
			g := ov.Connections[0].Gates[0]
			if g.Key != "c1/connection" {
				t.Fatalf("first gate = %q, want c1/connection", g.Key)
			}
			if g.HasWait != tt.wantHas || !near(g.WaitP50, tt.wantP50) || !near(g.WaitP99, tt.wantP99) {
				t.Errorf("c1 wait p50 %v p99 %v (%v), want %v %v (%v)", g.WaitP50, g.WaitP99, g.HasWait, tt.wantP50, tt.wantP99, tt.wantHas)
			}
			s := ov.Summary
			if s.HasP99Wait != tt.wantSummaryHas || !near(s.P99Wait, tt.wantSummary) {
				t.Errorf("summary p99 %v (%v), want %v (%v)", s.P99Wait, s.HasP99Wait, tt.wantSummary, tt.wantSummaryHas)
			}
		})
	}
}

func TestGateState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		g    GateBar
		want string
	}{
		{name: "idle", g: GateBar{Gate: live.Gate{Cap: 4}}, want: StateIdle},
		{name: "in use below its cap is busy, not idle", g: GateBar{Gate: live.Gate{Cap: 4, InFlight: 3}}, want: StateBusy},
		{name: "uncapped in use is busy", g: GateBar{Gate: live.Gate{InFlight: 30}}, want: StateBusy},
		{name: "full", g: GateBar{Gate: live.Gate{Cap: 4, InFlight: 4}}, want: StateFull},
		{name: "queueing", g: GateBar{Gate: live.Gate{Cap: 4, InFlight: 4, Queued: 1}}, want: StateQueueing},
		{name: "rejecting", g: GateBar{Gate: live.Gate{Cap: 4, InFlight: 4, Queued: 1}, RejectedLastMinute: 1}, want: StateRejecting},
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

func TestWaitText(t *testing.T) {
	t.Parallel()
	en, pt := NewLocalizer("en"), NewLocalizer("pt-BR")
	tests := []struct {
		name string
		l    *Localizer
		d    time.Duration
		want string
	}{
		{name: "no wait", l: en, d: 0, want: "0 ms"},
		{name: "milliseconds below a tenth of a second", l: en, d: 41600 * time.Microsecond, want: "42 ms"},
		{name: "tenths of a second", l: en, d: 389 * time.Millisecond, want: "0.4 s"},
		{name: "seconds", l: en, d: 1792 * time.Millisecond, want: "1.8 s"},
		{name: "decimal comma", l: pt, d: 1792 * time.Millisecond, want: "1,8 s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := waitText(tt.l, tt.d); got != tt.want {
				t.Errorf("waitText(%v) = %q, want %q", tt.d, got, tt.want)
			}
		})
	}
}

func TestWindowText(t *testing.T) {
	t.Parallel()
	en, pt := NewLocalizer("en"), NewLocalizer("pt-BR")
	tests := []struct {
		l    *Localizer
		d    time.Duration
		want string
	}{
		{l: en, d: 0, want: "over the last 1 s"},
		{l: en, d: 12 * time.Second, want: "over the last 12 s"},
		{l: en, d: 65 * time.Second, want: "over the last minute"},
		{l: pt, d: 60 * time.Second, want: "no último minuto"},
		{l: en, d: 90 * time.Second, want: "over the last 90 s"},
		{l: en, d: 10*time.Minute + 4*time.Second, want: "over the last 10 min"},
		{l: pt, d: 5 * time.Minute, want: "nos últimos 5 min"},
	}
	for _, tt := range tests {
		if got := windowText(tt.l, tt.d); got != tt.want {
			t.Errorf("windowText(%s, %v) = %q, want %q", tt.l.Tag(), tt.d, got, tt.want)
		}
	}
}

// TestOverviewFragments: /live redraws the summary's p99, each block's waiting keys
// and each connection gate's waits as the page draws them, each with its window.
func TestOverviewFragments(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var before, after live.WaitHistogram
	after.Observe(1500 * time.Millisecond)
	gate := func(queued int, w live.WaitHistogram, by map[string]int) live.Gate {
		return live.Gate{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Cap: 1, InFlight: 1,
			Queued: queued, QueuedByClient: by, Waits: w}
	}
	in := OverviewInput{
		Now:         now,
		Gates:       []live.Gate{gate(3, after, map[string]int{"ka": 3})},
		History:     []GateSnapshot{{At: now.Add(-61 * time.Second), Gates: []live.Gate{gate(12, before, nil)}}},
		Connections: []ConnectionStatus{{Connection: live.Connection{ID: "c1", Name: "zai-main", Provider: "zai"}, Enabled: true}},
		Clients:     []live.Client{{ID: "ka", Name: "demo", Weight: 1}},
	}
	frags := OverviewFragments(testPage("en", RoleViewer), BuildOverview(in))
	html := func(name string) string {
		t.Helper()
		c, ok := frags[name]
		if !ok {
			t.Fatalf("no fragment %q among %v", name, slices.Sorted(maps.Keys(frags)))
		}
		var b strings.Builder
		if err := c.Render(t.Context(), &b); err != nil {
			t.Fatal(err)
		}
		doc, err := goquery.NewDocumentFromReader(strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(doc.Text()), " ")
	}
	if got, want := html("sum-p99"), "· p99 wait 2.0 s over the last minute"; got != want {
		t.Errorf("sum-p99 %q, want %q", got, want)
	}
	if got, want := html("waiting-c1"), "Waiting at connection: demo requests 100% share · 3 queued · weight 1"; got != want {
		t.Errorf("waiting-c1 %q, want %q", got, want)
	}
	if got, want := html("wait-connection:c1"), "wait p50 1.5 s p99 2.0 s over the last minute"; got != want {
		t.Errorf("wait-connection:c1 %q, want %q", got, want)
	}
	if got := html("waiting-global"); got != "" {
		t.Errorf("waiting-global %q, want nothing (no global gate)", got)
	}
}
