package limits

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	provider := Settings{Providers: map[string]ProviderSettings{"zai": {MaxConcurrent: new(10), MaxWaitMs: new(20000)}, "off": {MaxWaitMs: new(0)}}}
	tests := []struct {
		name      string
		settings  Settings
		provider  string
		overrides Overrides
		// want lists the effective value and source of each key.
		want map[string]Origin
		// wantFallback lists Fallback(key) for keys whose fallback matters.
		wantFallback map[string]Origin
	}{
		{
			name: "nothing set: built-in defaults",
			want: map[string]Origin{
				KeyMaxConcurrent: {0, SourceDefault}, KeyModelConcurrency: {0, SourceDefault}, KeyMaxWaitMs: {30000, SourceDefault},
				KeyExecutionMaxWaitMs: {600000, SourceDefault}, KeyMaxQueueDepth: {0, SourceDefault},
				KeyRPM: {0, SourceDefault}, KeyRPD: {0, SourceDefault}, KeyTPM: {0, SourceDefault}, KeyTPD: {0, SourceDefault}, KeyMinTime: {0, SourceDefault},
			},
			wantFallback: map[string]Origin{KeyMaxWaitMs: {30000, SourceDefault}, KeyExecutionMaxWaitMs: {600000, SourceDefault}},
		},
		{
			name:     "settings row beats built-in default",
			settings: Settings{DefaultMaxWaitMs: new(5000), DefaultExecutionMaxWaitMs: new(90000), DefaultMaxQueueDepth: new(50)},
			want: map[string]Origin{
				KeyMaxWaitMs: {5000, SourceSettings}, KeyExecutionMaxWaitMs: {90000, SourceSettings}, KeyMaxQueueDepth: {50, SourceSettings},
			},
		},
		{
			name: "provider wait beats settings", settings: provider, provider: "zai",
			want:         map[string]Origin{KeyMaxWaitMs: {20000, SourceProvider}},
			wantFallback: map[string]Origin{KeyMaxWaitMs: {20000, SourceProvider}},
		},
		{
			name: "provider wait 0 is off", settings: provider, provider: "off",
			want: map[string]Origin{KeyMaxWaitMs: {30000, SourceDefault}},
		},
		{
			name: "another provider's wait does not apply", settings: provider, provider: "openai",
			want: map[string]Origin{KeyMaxWaitMs: {30000, SourceDefault}},
		},
		{
			name: "connection beats provider", settings: provider, provider: "zai",
			overrides:    Overrides{MaxWaitMs: new(1000), ExecutionMaxWaitMs: new(300000), MaxQueueDepth: new(7)},
			want:         map[string]Origin{KeyMaxWaitMs: {1000, SourceConnection}, KeyExecutionMaxWaitMs: {300000, SourceConnection}, KeyMaxQueueDepth: {7, SourceConnection}},
			wantFallback: map[string]Origin{KeyMaxWaitMs: {20000, SourceProvider}, KeyExecutionMaxWaitMs: {600000, SourceDefault}},
		},
		{
			name: "connection 0 inherits for waits and queue depth", settings: provider, provider: "zai",
			overrides: Overrides{MaxWaitMs: new(0), ExecutionMaxWaitMs: new(0), MaxQueueDepth: new(0)},
			want:      map[string]Origin{KeyMaxWaitMs: {20000, SourceProvider}, KeyExecutionMaxWaitMs: {600000, SourceDefault}, KeyMaxQueueDepth: {0, SourceDefault}},
		},
		{
			name:      "connection 0 is its own value for caps and rates",
			overrides: Overrides{MaxConcurrent: new(0), RPM: new(0), MinTimeMs: new(0)},
			want:      map[string]Origin{KeyMaxConcurrent: {0, SourceConnection}, KeyRPM: {0, SourceConnection}, KeyMinTime: {0, SourceConnection}},
		},
		{
			name: "caps and rates from the connection",
			overrides: Overrides{MaxConcurrent: new(4), ModelConcurrency: map[string]int{"glm-5": 1}, RPM: new(60), RPD: new(1000),
				TPM: new(int64(50000)), TPD: new(int64(9000000000)), MinTimeMs: new(100)},
			want: map[string]Origin{
				KeyMaxConcurrent: {4, SourceConnection}, KeyModelConcurrency: {0, SourceConnection}, KeyRPM: {60, SourceConnection},
				KeyRPD: {1000, SourceConnection}, KeyTPM: {50000, SourceConnection}, KeyTPD: {9000000000, SourceConnection}, KeyMinTime: {100, SourceConnection},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := Resolve(tt.settings, tt.provider, tt.overrides)
			values := map[string]int64{
				KeyMaxConcurrent: int64(e.MaxConcurrent), KeyModelConcurrency: 0, KeyMaxWaitMs: int64(e.MaxWaitMs),
				KeyExecutionMaxWaitMs: int64(e.ExecutionMaxWaitMs), KeyMaxQueueDepth: int64(e.MaxQueueDepth),
				KeyRPM: int64(e.RPM), KeyRPD: int64(e.RPD), KeyTPM: e.TPM, KeyTPD: e.TPD, KeyMinTime: int64(e.MinTimeMs),
			}
			for key, want := range tt.want {
				got := Origin{Value: values[key], Source: e.Source(key)}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s mismatch (-want +got):\n%s", key, diff)
				}
			}
			for key, want := range tt.wantFallback {
				if diff := cmp.Diff(want, e.Fallback(key)); diff != "" {
					t.Errorf("Fallback(%s) mismatch (-want +got):\n%s", key, diff)
				}
			}
		})
	}
}

func TestResolveModelCaps(t *testing.T) {
	t.Parallel()
	o := Overrides{ModelConcurrency: map[string]int{"glm-5": 1, "glm-4.7": 3}}
	e := Resolve(Settings{}, "zai", o)
	o.ModelConcurrency["glm-5"] = 9 // must not reach e
	tests := []struct {
		name  string
		model string
		want  int
	}{
		{name: "capped model", model: "glm-5", want: 1},
		{name: "another capped model", model: "glm-4.7", want: 3},
		{name: "uncapped model", model: "glm-4", want: 0},
		{name: "exact match only", model: "zai/glm-5", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := e.ModelCap(tt.model); got != tt.want {
				t.Errorf("ModelCap(%q) = %d, want %d", tt.model, got, tt.want)
			}
		})
	}
}

func TestEffectiveUnknownKey(t *testing.T) {
	t.Parallel()
	e := Resolve(Settings{}, "", Overrides{})
	if got := e.Source("nope"); got != "" {
		t.Errorf("Source(nope) = %q, want empty", got)
	}
	if diff := cmp.Diff(Origin{}, e.Fallback("nope")); diff != "" {
		t.Errorf("Fallback(nope) mismatch (-want +got):\n%s", diff)
	}
}

func TestEffectiveDurations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		o           Overrides
		wantSpacing time.Duration
	}{
		{name: "no spacing", o: Overrides{}, wantSpacing: 0},
		{name: "minTime only", o: Overrides{MinTimeMs: new(250)}, wantSpacing: 250 * time.Millisecond},
		{name: "rpm only", o: Overrides{RPM: new(120)}, wantSpacing: 500 * time.Millisecond},
		{name: "rpm stricter than minTime", o: Overrides{RPM: new(60), MinTimeMs: new(100)}, wantSpacing: time.Second},
		{name: "minTime stricter than rpm", o: Overrides{RPM: new(600), MinTimeMs: new(1500)}, wantSpacing: 1500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := Resolve(Settings{}, "", tt.o)
			if got := e.DispatchSpacing(); got != tt.wantSpacing {
				t.Errorf("DispatchSpacing() = %v, want %v", got, tt.wantSpacing)
			}
			if got := e.MaxWait(); got != 30*time.Second {
				t.Errorf("MaxWait() = %v, want 30s", got)
			}
			if got := e.ExecutionMaxWait(); got != 10*time.Minute {
				t.Errorf("ExecutionMaxWait() = %v, want 10m", got)
			}
		})
	}
}
