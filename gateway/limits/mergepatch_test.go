package limits

import (
	"testing"
)

func TestMergePatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, target, patch, want string
	}{
		{
			name:   "null removes one model cap, keeps the rest",
			target: `{"rateLimitOverrides":{"maxConcurrent":4,"modelConcurrency":{"glm-5":1,"glm-4.7":3}},"name":"zai-main"}`,
			patch:  `{"rateLimitOverrides":{"modelConcurrency":{"glm-5":null}}}`,
			want:   `{"name":"zai-main","rateLimitOverrides":{"maxConcurrent":4,"modelConcurrency":{"glm-4.7":3}}}`,
		},
		{
			name:   "null at the top clears all overrides",
			target: `{"rateLimitOverrides":{"maxConcurrent":4},"name":"zai-main"}`,
			patch:  `{"rateLimitOverrides":null}`,
			want:   `{"name":"zai-main"}`,
		},
		{
			name:   "nested objects merge",
			target: `{"rateLimitOverrides":{"maxConcurrent":4,"modelConcurrency":{"glm-5":1}}}`,
			patch:  `{"rateLimitOverrides":{"rpm":60,"modelConcurrency":{"glm-4.7":3}}}`,
			want:   `{"rateLimitOverrides":{"maxConcurrent":4,"modelConcurrency":{"glm-4.7":3,"glm-5":1},"rpm":60}}`,
		},
		{name: "numbers kept as written", target: `{"a":1.0}`, patch: `{"b":1e3}`, want: `{"a":1.0,"b":1e3}`},
		{name: "no HTML escaping", target: `{}`, patch: `{"a":"<&>"}`, want: `{"a":"<&>"}`},
		{name: "empty target counts as null", target: ``, patch: `{"a":1}`, want: `{"a":1}`},
		// RFC 7396 appendix A.
		{name: "rfc replace", target: `{"a":"b"}`, patch: `{"a":"c"}`, want: `{"a":"c"}`},
		{name: "rfc add", target: `{"a":"b"}`, patch: `{"b":"c"}`, want: `{"a":"b","b":"c"}`},
		{name: "rfc remove", target: `{"a":"b"}`, patch: `{"a":null}`, want: `{}`},
		{name: "rfc remove one of two", target: `{"a":"b","b":"c"}`, patch: `{"a":null}`, want: `{"b":"c"}`},
		{name: "rfc array replaced", target: `{"a":["b"]}`, patch: `{"a":"c"}`, want: `{"a":"c"}`},
		{name: "rfc value becomes array", target: `{"a":"c"}`, patch: `{"a":["b"]}`, want: `{"a":["b"]}`},
		{name: "rfc nested", target: `{"a":{"b":"c"}}`, patch: `{"a":{"b":"d","c":null}}`, want: `{"a":{"b":"d"}}`},
		{name: "rfc arrays are not merged", target: `{"a":[{"b":"c"}]}`, patch: `{"a":[1]}`, want: `{"a":[1]}`},
		{name: "rfc array target", target: `["a","b"]`, patch: `["c","d"]`, want: `["c","d"]`},
		{name: "rfc object replaces array", target: `{"a":"b"}`, patch: `["c"]`, want: `["c"]`},
		{name: "rfc null patch", target: `{"a":"foo"}`, patch: `null`, want: `null`},
		{name: "rfc string patch", target: `{"a":"foo"}`, patch: `"bar"`, want: `"bar"`},
		{name: "rfc null member kept in target", target: `{"e":null}`, patch: `{"a":1}`, want: `{"a":1,"e":null}`},
		{name: "rfc array target becomes object", target: `[1,2]`, patch: `{"a":"b","c":null}`, want: `{"a":"b"}`},
		{name: "rfc deep null in new member dropped", target: `{}`, patch: `{"a":{"bb":{"ccc":null}}}`, want: `{"a":{"bb":{}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := MergePatch([]byte(tt.target), []byte(tt.patch))
			if err != nil {
				t.Fatalf("MergePatch: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("MergePatch(%s, %s) = %s, want %s", tt.target, tt.patch, got, tt.want)
			}
		})
	}
}

func TestMergePatchErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, target, patch string
	}{
		{name: "bad target", target: `{"a":`, patch: `{}`},
		{name: "bad patch", target: `{}`, patch: `{a:1}`},
		{name: "empty patch", target: `{}`, patch: ``},
		{name: "trailing data in patch", target: `{}`, patch: `{} {}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, err := MergePatch([]byte(tt.target), []byte(tt.patch)); err == nil {
				t.Errorf("MergePatch(%s, %s) = %s, want an error", tt.target, tt.patch, got)
			}
		})
	}
}

func TestMergePatchThenDecode(t *testing.T) {
	t.Parallel()
	stored := `{"maxConcurrent":4,"modelConcurrency":{"glm-5":1,"glm-4.7":3},"rpm":60}`
	merged, err := MergePatch([]byte(stored), []byte(`{"modelConcurrency":{"glm-5":null,"glm-4.7":null},"rpm":null}`))
	if err != nil {
		t.Fatalf("MergePatch: %v", err)
	}
	o, errs := DecodeOverrides(merged, prefix)
	if errs != nil {
		t.Fatalf("DecodeOverrides(%s): %v", merged, errs)
	}
	if o.ModelConcurrency != nil || o.RPM != nil || o.MaxConcurrent == nil || *o.MaxConcurrent != 4 {
		t.Errorf("after removing every model cap and rpm got %+v, want only maxConcurrent 4", o)
	}
}
