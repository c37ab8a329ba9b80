package web

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDiffJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		before, after string
		want          []DiffLine
	}{
		{
			name:   "cap changed",
			before: `{"rateLimitOverrides":{"modelConcurrency":{"glm-5":1}}}`,
			after:  `{"rateLimitOverrides":{"modelConcurrency":{"glm-5":2}}}`,
			want:   []DiffLine{{Path: "rateLimitOverrides.modelConcurrency.glm-5", Op: DiffChanged, Before: "1", After: "2"}},
		},
		{
			name:   "added removed and unchanged",
			before: `{"name":"a","priority":0,"rateLimitOverrides":{"maxConcurrent":4}}`,
			after:  `{"name":"a","enabled":false,"rateLimitOverrides":{}}`,
			want: []DiffLine{
				{Path: "enabled", Op: DiffAdded, After: "false"},
				{Path: "priority", Op: DiffRemoved, Before: "0"},
				{Path: "rateLimitOverrides.maxConcurrent", Op: DiffRemoved, Before: "4"},
			},
		},
		{
			name:   "create from nothing",
			before: ``,
			after:  `{"name":"zai-main","models":["glm-5","glm-4.7"]}`,
			want: []DiffLine{
				{Path: "models", Op: DiffAdded, After: `["glm-5","glm-4.7"]`},
				{Path: "name", Op: DiffAdded, After: `"zai-main"`},
			},
		},
		{
			name:   "delete to null",
			before: `{"name":"x"}`,
			after:  `null`,
			want:   []DiffLine{{Path: "name", Op: DiffRemoved, Before: `"x"`}},
		},
		{
			name:   "arrays are leaves",
			before: `{"models":["a"]}`,
			after:  `{"models":["a","b"]}`,
			want:   []DiffLine{{Path: "models", Op: DiffChanged, Before: `["a"]`, After: `["a","b"]`}},
		},
		{
			name:   "dotted key quoted",
			before: `{"m":{"glm-4.7":1}}`,
			after:  `{"m":{"glm-4.7":3}}`,
			want:   []DiffLine{{Path: `m["glm-4.7"]`, Op: DiffChanged, Before: "1", After: "3"}},
		},
		{
			name:   "numbers keep their text",
			before: `{"tpd":10000000000}`,
			after:  `{"tpd":10000000001}`,
			want:   []DiffLine{{Path: "tpd", Op: DiffChanged, Before: "10000000000", After: "10000000001"}},
		},
		{
			name:   "type change",
			before: `{"a":{"b":1}}`,
			after:  `{"a":2}`,
			want: []DiffLine{
				{Path: "a", Op: DiffAdded, After: "2"},
				{Path: "a.b", Op: DiffRemoved, Before: "1"},
			},
		},
		{name: "identical", before: `{"a":1,"b":[1,2]}`, after: `{"b":[1,2],"a":1}`, want: nil},
		{
			name:   "invalid json compared as text",
			before: `{"a":`,
			after:  `{"a":1}`,
			want:   []DiffLine{{Op: DiffChanged, Before: `{"a":`, After: `{"a":1}`}},
		},
		{
			name:   "scalar documents",
			before: `1`,
			after:  `2`,
			want:   []DiffLine{{Path: "", Op: DiffChanged, Before: "1", After: "2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := DiffJSON([]byte(tt.before), []byte(tt.after))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DiffJSON mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestActorName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, actor, want string
	}{
		{name: "dashboard user", actor: "user:admin@localhost", want: "admin@localhost"},
		{name: "API token", actor: "token:ci", want: "token:ci"},
		{name: "system", actor: "system", want: "system"},
		{name: "bare prefix", actor: "user:", want: "user:"},
		{name: "entry from before the prefix", actor: "ops@example.com", want: "ops@example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ActorName(tt.actor); got != tt.want {
				t.Errorf("ActorName(%q) = %q, want %q", tt.actor, got, tt.want)
			}
		})
	}
}

// TestShortPath: the audit page writes every nested key one way, a dot, a bracket
// or a quote in a key or not.
func TestShortPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ path, want string }{
		{"rateLimitOverrides.modelConcurrency.glm-5", "modelConcurrency › glm-5"},
		{`rateLimitOverrides.modelConcurrency["glm-4.7"]`, "modelConcurrency › glm-4.7"},
		{`limits.models`, "limits › models"},
		{`m["a\"]b"]["x.y"].z`, `m › a"]b › x.y › z`},
		{`[""]`, ""},
		{"name", "name"},
		{`m["unterminated`, `m › ["unterminated`},
	} {
		if got := shortPath(tc.path); got != tc.want {
			t.Errorf("shortPath(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}
