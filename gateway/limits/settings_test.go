package limits

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       string
		want     Settings
		wantErrs FieldErrors
	}{
		{name: "null is no settings", in: `null`, want: Settings{}},
		{
			name: "every key",
			in: `{"globalMaxConcurrent":64,"defaultMaxWaitMs":20000,"defaultExecutionMaxWaitMs":300000,"defaultMaxQueueDepth":500,` +
				`"maxAttempts":2,"suspendMs":60000,"breakerFailures":3,"breakerCooldownMs":10000,"priorityAgingMs":5000,` +
				`"providers":{"zai":{"maxConcurrent":8,"maxWaitMs":15000},"open-ai2":{"maxConcurrent":0}}}`,
			want: Settings{
				GlobalMaxConcurrent: new(64), DefaultMaxWaitMs: new(20000), DefaultExecutionMaxWaitMs: new(300000), DefaultMaxQueueDepth: new(500),
				MaxAttempts: new(2), SuspendMs: new(60000), BreakerFailures: new(3), BreakerCooldownMs: new(10000), PriorityAgingMs: new(5000),
				Providers: map[string]ProviderSettings{"zai": {MaxConcurrent: new(8), MaxWaitMs: new(15000)}, "open-ai2": {MaxConcurrent: new(0)}},
			},
		},
		{name: "empty provider entries are dropped", in: `{"providers":{"zai":{},"x":null}}`, want: Settings{}},
		{
			name: "every problem with its path",
			in: `{"maxAttempts":11,"defaultMaxWaitMs":0,"breakerCooldownMs":999,"suspendMs":"1","tmp":1,"priorityAgingMs":99,"defaultOutputReserve":0,"maxOutputReserve":0,` +
				`"providers":{"Bad_Key":{"maxConcurrent":1},"zai":{"maxConcurrent":-1,"maxWaitMs":1.5,"rpm":3},"openai":5}}`,
			wantErrs: FieldErrors{
				{Field: "settings.breakerCooldownMs", Message: "must be a whole number from 1000 to 3600000"},
				{Field: "settings.defaultMaxWaitMs", Message: "must be a whole number from 1 to 120000"},
				{Field: "settings.defaultOutputReserve", Message: "must be a whole number from 1 to 1000000"},
				{Field: "settings.maxAttempts", Message: "must be a whole number from 1 to 10"},
				{Field: "settings.maxOutputReserve", Message: "must be a whole number from 1 to 10000000"},
				{Field: "settings.priorityAgingMs", Message: "must be a whole number from 100 to 3600000"},
				{Field: "settings.providers.Bad_Key", Message: "provider name must be 1 to 32 characters of a-z, 0-9 and '-'"},
				{Field: "settings.providers.openai", Message: plainMessage(CodeNotObject).text},
				{Field: "settings.providers.zai.maxConcurrent", Message: "must be a whole number from 0 to 100000"},
				{Field: "settings.providers.zai.maxWaitMs", Message: "must be a whole number from 0 to 120000"},
				{Field: "settings.providers.zai.rpm", Message: plainMessage(CodeUnknownField).text},
				{Field: "settings.suspendMs", Message: "must be a whole number from 0 to 86400000"},
				{Field: "settings.tmp", Message: plainMessage(CodeUnknownField).text},
			},
		},
		{name: "providers not an object", in: `{"providers":["zai"]}`, wantErrs: FieldErrors{{Field: "settings.providers", Message: plainMessage(CodeNotProviderMap).text}}},
		{name: "provider key too long", in: `{"providers":{"abcdefghijklmnopqrstuvwxyz0123456":{"maxConcurrent":1}}}`, wantErrs: FieldErrors{{Field: "settings.providers.abcdefghijklmnopqrstuvwxyz0123456", Message: "provider name must be 1 to 32 characters of a-z, 0-9 and '-'"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := DecodeSettings([]byte(tt.in), "settings")
			if diff := cmp.Diff(tt.wantErrs, errs, ignoreCodes); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("settings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSettingsRoundTrip(t *testing.T) {
	t.Parallel()
	in := `{"maxAttempts":2,"providers":{"zai":{"maxConcurrent":8}}}`
	s, errs := DecodeSettings([]byte(in), "")
	if errs != nil {
		t.Fatalf("DecodeSettings: %v", errs)
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("Marshal = %s, want %s", out, in)
	}
}

func TestNormalizeSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		in           string
		want         Settings
		wantWarnings []string
	}{
		{name: "empty", in: ``, want: Settings{}},
		{
			name: "bad parts dropped",
			in:   `{"maxAttempts":0,"globalMaxConcurrent":10,"providers":{"zai":{"maxConcurrent":-1,"maxWaitMs":500},"BAD":{"maxConcurrent":2},"x":{"maxConcurrent":"2"}}}`,
			want: Settings{GlobalMaxConcurrent: new(10), Providers: map[string]ProviderSettings{"zai": {MaxWaitMs: new(500)}}},
			wantWarnings: []string{
				"settings.maxAttempts: must be a whole number from 1 to 10 (ignored)",
				"settings.providers.BAD: provider name must be 1 to 32 characters of a-z, 0-9 and '-' (ignored)",
				"settings.providers.x.maxConcurrent: must be a whole number from 0 to 100000 (ignored)",
				"settings.providers.zai.maxConcurrent: must be a whole number from 0 to 100000 (ignored)",
			},
		},
		{name: "not an object", in: `true`, want: Settings{}, wantWarnings: []string{"settings: must be a JSON object (ignored)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, warnings := NormalizeSettings([]byte(tt.in))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("settings mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWarnings, warnings); diff != "" {
				t.Errorf("warnings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSettingsEffective(t *testing.T) {
	t.Parallel()
	defaults := EffectiveSettings{
		GlobalMaxConcurrent: 0, DefaultMaxWaitMs: 30000, DefaultExecutionMaxWaitMs: 600000, DefaultMaxQueueDepth: 0,
		MaxAttempts: 3, SuspendMs: 1800000, BreakerFailures: 5, BreakerCooldownMs: 30000, PriorityAgingMs: 10000,
		DefaultOutputReserve: 4096, MaxOutputReserve: 65536, AffinityTTLMs: 300000, MaxAffinityBindings: 100000, AffinityMaxWaitMs: 2000, LoopWindowMs: 600000, AlertCooldownMs: 900000,
	}
	tests := []struct {
		name string
		in   Settings
		want EffectiveSettings
	}{
		{name: "absent keys take the defaults", in: Settings{}, want: defaults},
		{name: "DefaultSettings is the defaults", in: DefaultSettings(), want: defaults},
		{
			name: "set keys win, zeros included",
			in:   Settings{SuspendMs: new(0), MaxAttempts: new(1), DefaultOutputReserve: new(256), Providers: map[string]ProviderSettings{"zai": {MaxConcurrent: new(4)}}},
			want: EffectiveSettings{
				DefaultMaxWaitMs: 30000, DefaultExecutionMaxWaitMs: 600000, MaxAttempts: 1, SuspendMs: 0, BreakerFailures: 5, BreakerCooldownMs: 30000, PriorityAgingMs: 10000,
				DefaultOutputReserve: 256, MaxOutputReserve: 65536, AffinityTTLMs: 300000, MaxAffinityBindings: 100000, AffinityMaxWaitMs: 2000, LoopWindowMs: 600000, AlertCooldownMs: 900000,
				Providers: map[string]EffectiveProvider{"zai": {MaxConcurrent: 4}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, tt.in.Effective()); diff != "" {
				t.Errorf("Effective() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, tt.in.WithDefaults().Effective()); diff != "" {
				t.Errorf("WithDefaults().Effective() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSettingsWithDefaultsFillsEveryKey(t *testing.T) {
	t.Parallel()
	got := Settings{MaxAttempts: new(7)}.WithDefaults()
	want := DefaultSettings()
	want.MaxAttempts = new(7)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WithDefaults() mismatch (-want +got):\n%s", diff)
	}
	// DefaultSettings must itself pass the write rules.
	data, err := json.Marshal(DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	if _, errs := DecodeSettings(data, ""); errs != nil {
		t.Errorf("DefaultSettings() does not pass DecodeSettings: %v", errs)
	}
}

func TestEffectiveSettingsDurations(t *testing.T) {
	t.Parallel()
	e := Settings{}.Effective()
	got := []time.Duration{e.DefaultMaxWait(), e.DefaultExecutionMaxWait(), e.SuspendDuration(), e.BreakerCooldown()}
	want := []time.Duration{30 * time.Second, 10 * time.Minute, 30 * time.Minute, 30 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("durations mismatch (-want +got):\n%s", diff)
	}
}
