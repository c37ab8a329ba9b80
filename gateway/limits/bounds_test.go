package limits

import (
	"testing"
	"time"
)

// TestBoundsPrecedence: a connection's bound wins when above 0, then the
// provider's (the wait only), then the settings', then the built-in default.
func TestBoundsPrecedence(t *testing.T) {
	eff := Settings{DefaultMaxWaitMs: new(20000), DefaultMaxQueueDepth: new(50), DefaultExecutionMaxWaitMs: new(90000),
		Providers: map[string]ProviderSettings{"zai": {MaxWaitMs: new(500)}}}.Effective()
	builtIn := Settings{}.Effective()
	for _, tc := range []struct {
		name     string
		eff      EffectiveSettings
		provider string
		o        Overrides
		want     Bounds
	}{
		{"the connection's own", eff, "zai", Overrides{MaxWaitMs: new(100), MaxQueueDepth: new(3), ExecutionMaxWaitMs: new(1000)},
			Bounds{100 * time.Millisecond, 3, time.Second}},
		{"the provider's wait", eff, "zai", Overrides{}, Bounds{500 * time.Millisecond, 50, 90 * time.Second}},
		{"0 inherits", eff, "zai", Overrides{MaxWaitMs: new(0), MaxQueueDepth: new(0), ExecutionMaxWaitMs: new(0)},
			Bounds{500 * time.Millisecond, 50, 90 * time.Second}},
		{"the settings'", eff, "openai", Overrides{}, Bounds{20 * time.Second, 50, 90 * time.Second}},
		{"built in", builtIn, "openai", Overrides{}, Bounds{time.Duration(DefaultMaxWaitMs) * time.Millisecond, DefaultMaxQueueDepth,
			time.Duration(DefaultExecutionMaxWaitMs) * time.Millisecond}},
	} {
		if got := tc.eff.Bounds(tc.provider, tc.o); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
