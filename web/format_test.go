package web

import (
	"testing"
	"time"
)

func TestFormatting(t *testing.T) {
	t.Parallel()
	en, pt := NewLocalizer("en"), NewLocalizer("pt-BR")
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "ms", got: Ms(300000), want: "300000 ms"},
		{name: "ratio", got: Ratio(3, 4), want: "3 / 4"},
		{name: "ratio uncapped", got: Ratio(0, 0), want: "0 / –"},
		{name: "cap none", got: CapText(0), want: "–"},
		{name: "caps summary", got: CapsSummary(4, map[string]int{"glm-5": 1, "glm-4.7": 3}), want: "4 · glm-4.7=3 glm-5=1"},
		{name: "caps summary no model caps", got: CapsSummary(4, nil), want: "4"},
		{name: "caps summary no connection cap", got: CapsSummary(0, map[string]int{"glm-5": 1}), want: "– · glm-5=1"},
		{name: "seconds", got: en.Duration(1800 * time.Millisecond), want: "1.8 s"},
		{name: "seconds pt", got: pt.Duration(1800 * time.Millisecond), want: "1,8 s"},
		{name: "sub second", got: en.Duration(400 * time.Millisecond), want: "0.4 s"},
		{name: "whole seconds", got: en.Duration(12 * time.Second), want: "12 s"},
		{name: "minutes", got: en.Duration(29 * time.Minute), want: "29 min"},
		{name: "hours", got: en.Duration(10 * time.Hour), want: "10 h"},
		{name: "negative", got: en.Duration(-time.Second), want: "0.0 s"},
		{name: "int small", got: en.Int(9999), want: "9999"},
		{name: "int grouped", got: en.Int(10000000), want: "10,000,000"},
		{name: "int grouped pt", got: pt.Int(9120000), want: "9.120.000"},
		{name: "int negative", got: en.Int(-12345), want: "-12,345"},
		{name: "percent", got: percent(3, 4), want: "75%"},
		{name: "percent over", got: percent(5, 4), want: "100%"},
		{name: "percent uncapped", got: percent(5, 0), want: "0%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestAgo(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		tag  string
		at   time.Time
		want string
	}{
		{name: "just now", tag: "en", at: now.Add(-10 * time.Second), want: "just now"},
		{name: "minutes", tag: "en", at: now.Add(-3 * time.Minute), want: "3 min ago"},
		{name: "minutes pt", tag: "pt-BR", at: now.Add(-3 * time.Minute), want: "há 3 min"},
		{name: "hours", tag: "en", at: now.Add(-5 * time.Hour), want: "5 h ago"},
		{name: "old", tag: "en", at: now.Add(-72 * time.Hour), want: "2026-02-26 12:00 UTC"},
		{name: "old pt", tag: "pt-BR", at: now.Add(-72 * time.Hour), want: "26/02/2026 12:00 UTC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := NewLocalizer(tt.tag).Ago(tt.at, now); got != tt.want {
				t.Errorf("Ago = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFormField(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, path, want string }{
		{name: "model cap", path: "rateLimitOverrides.modelConcurrency.glm-5", want: "modelConcurrency"},
		{name: "override", path: "rateLimitOverrides.maxWaitMs", want: "maxWaitMs"},
		{name: "top level", path: "name", want: "name"},
		{name: "list index", path: "models[3]", want: "models"},
		{name: "providers", path: "providers.zai.maxConcurrent", want: "providers"},
		{name: "shadow model cap", path: "rateLimitOverrides.shadow.modelConcurrency.glm-5", want: "shadow.modelConcurrency"},
		{name: "shadow connection cap", path: "rateLimitOverrides.shadow.maxConcurrent", want: "shadow.maxConcurrent"},
		{name: "shadow itself", path: "rateLimitOverrides.shadow", want: "shadow"},
		{name: "adaptive", path: "rateLimitOverrides.adaptive", want: "adaptive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := FormField(tt.path); got != tt.want {
				t.Errorf("FormField(%q) = %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}
