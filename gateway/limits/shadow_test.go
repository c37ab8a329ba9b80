package limits

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeAdaptiveAndShadow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       string
		want     Overrides
		wantErrs FieldErrors
	}{
		{name: "adaptive with a cap", in: `{"maxConcurrent":8,"adaptive":true}`, want: Overrides{MaxConcurrent: new(8), Adaptive: new(true)}},
		{name: "adaptive false needs no cap", in: `{"adaptive":false}`, want: Overrides{Adaptive: new(false)}},
		{name: "adaptive null is absent", in: `{"adaptive":null,"rpm":1}`, want: Overrides{RPM: new(1)}},
		{name: "adaptive without a cap", in: `{"adaptive":true}`, wantErrs: FieldErrors{{Field: "rateLimitOverrides.adaptive", Message: "needs a maxConcurrent of 1 or more (the learned cap stays between 1 and it)", Code: CodeAdaptiveNeedsCap}}},
		{name: "adaptive with cap 0", in: `{"adaptive":true,"maxConcurrent":0}`, wantErrs: FieldErrors{{Field: "rateLimitOverrides.adaptive", Message: "needs a maxConcurrent of 1 or more (the learned cap stays between 1 and it)", Code: CodeAdaptiveNeedsCap}}},
		{name: "adaptive not a bool", in: `{"adaptive":"yes","maxConcurrent":2}`, wantErrs: FieldErrors{{Field: "rateLimitOverrides.adaptive", Message: "must be true or false", Code: CodeNotBool}}},
		{
			name: "shadow caps",
			in:   `{"shadow":{"maxConcurrent":2,"modelConcurrency":{"glm-5":1}}}`,
			want: Overrides{Shadow: &ShadowCaps{MaxConcurrent: new(2), ModelConcurrency: map[string]int{"glm-5": 1}}},
		},
		{name: "empty shadow is normalised away", in: `{"shadow":{"modelConcurrency":{}}}`, want: Overrides{}},
		{name: "null shadow is absent", in: `{"shadow":null}`, want: Overrides{}},
		{
			name: "shadow validated like the real caps, with paths",
			in:   `{"shadow":{"maxConcurrent":-1,"modelConcurrency":{"glm-5":0,"a b":1},"rpm":3}}`,
			wantErrs: FieldErrors{
				{Field: "rateLimitOverrides.shadow.maxConcurrent", Message: "must be a whole number from 0 to 10000", Code: CodeWholeNumberRange, Args: []any{int64(0), int64(10000)}},
				{Field: "rateLimitOverrides.shadow.modelConcurrency.a b", Message: "model name must be 1 to 128 characters, with no spaces, '=' or ','", Code: CodeModelKey, Args: []any{128}},
				{Field: "rateLimitOverrides.shadow.modelConcurrency.glm-5", Message: "cap must be a whole number from 1 to 10000", Code: CodeCapRange, Args: []any{int64(1), int64(10000)}},
				{Field: "rateLimitOverrides.shadow.rpm", Message: "unknown field", Code: CodeUnknownField},
			},
		},
		{name: "shadow not an object", in: `{"shadow":3}`, wantErrs: FieldErrors{{Field: "rateLimitOverrides.shadow", Message: "must be a JSON object", Code: CodeNotObject}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := DecodeOverrides([]byte(tt.in), prefix)
			if diff := cmp.Diff(tt.wantErrs, errs); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("overrides mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormalizeAdaptiveAndShadowFailOpen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       string
		want     Overrides
		warnings []string
	}{
		{
			name:     "adaptive without a cap is dropped",
			in:       `{"adaptive":true,"rpm":5}`,
			want:     Overrides{RPM: new(5)},
			warnings: []string{"rateLimitOverrides.adaptive: needs a maxConcurrent of 1 or more (the learned cap stays between 1 and it) (ignored)"},
		},
		{
			name:     "adaptive with a broken cap is dropped with the cap",
			in:       `{"adaptive":true,"maxConcurrent":"8"}`,
			want:     Overrides{},
			warnings: []string{"rateLimitOverrides.adaptive: needs a maxConcurrent of 1 or more (the learned cap stays between 1 and it) (ignored)", "rateLimitOverrides.maxConcurrent: must be a whole number from 0 to 10000 (ignored)"},
		},
		{
			name:     "a bad shadow entry is dropped, the rest kept",
			in:       `{"shadow":{"maxConcurrent":2,"modelConcurrency":{"glm-5":0,"ok":3}}}`,
			want:     Overrides{Shadow: &ShadowCaps{MaxConcurrent: new(2), ModelConcurrency: map[string]int{"ok": 3}}},
			warnings: []string{"rateLimitOverrides.shadow.modelConcurrency.glm-5: cap must be a whole number from 1 to 10000 (ignored)"},
		},
		{
			name:     "a shadow left empty goes",
			in:       `{"shadow":{"maxConcurrent":20000}}`,
			want:     Overrides{},
			warnings: []string{"rateLimitOverrides.shadow.maxConcurrent: must be a whole number from 0 to 10000 (ignored)"},
		},
		{name: "adaptive string dropped", in: `{"adaptive":1,"maxConcurrent":3}`, want: Overrides{MaxConcurrent: new(3)}, warnings: []string{"rateLimitOverrides.adaptive: must be true or false (ignored)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, warnings := Normalize([]byte(tt.in))
			if diff := cmp.Diff(tt.warnings, warnings); diff != "" {
				t.Errorf("warnings mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("overrides mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMergePatchShadow(t *testing.T) {
	t.Parallel()
	stored := `{"maxConcurrent":8,"adaptive":true,"shadow":{"maxConcurrent":2,"modelConcurrency":{"glm-5":1,"glm-4.7":2}}}`
	merged, err := MergePatch([]byte(stored), []byte(`{"adaptive":null,"shadow":{"modelConcurrency":{"glm-5":null}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, errs := DecodeOverrides(merged, prefix)
	if errs != nil {
		t.Fatalf("DecodeOverrides(%s): %v", merged, errs)
	}
	want := Overrides{MaxConcurrent: new(8), Shadow: &ShadowCaps{MaxConcurrent: new(2), ModelConcurrency: map[string]int{"glm-4.7": 2}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	// Removing the last shadow key leaves no shadow object behind.
	merged, err = MergePatch(merged, []byte(`{"shadow":{"maxConcurrent":null,"modelConcurrency":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, errs = DecodeOverrides(merged, prefix); errs != nil || got.Shadow != nil {
		t.Errorf("DecodeOverrides(%s) = %+v, %v; want no shadow", merged, got, errs)
	}
}

func TestApplyFormAdaptiveAndShadow(t *testing.T) {
	t.Parallel()
	base := Overrides{MaxConcurrent: new(8), Adaptive: new(true), Shadow: &ShadowCaps{MaxConcurrent: new(2), ModelConcurrency: map[string]int{"glm-5": 1}}}
	tests := []formCase{
		{name: "a form without the fields keeps them", form: url.Values{"rpm": {"5"}}, want: Overrides{MaxConcurrent: new(8), Adaptive: new(true), Shadow: base.Shadow, RPM: new(5)}},
		{name: "unchecked box (hidden marker only) clears adaptive", form: url.Values{"adaptive": {"false"}}, want: Overrides{MaxConcurrent: new(8), Shadow: base.Shadow}},
		{name: "checked box keeps adaptive", form: url.Values{"adaptive": {"false", "true"}}, want: base},
		{
			name: "shadow fields set and blanked",
			form: url.Values{"shadow.maxConcurrent": {""}, "shadow.modelConcurrency": {"glm-5=3\nglm-4.7=2"}},
			want: Overrides{MaxConcurrent: new(8), Adaptive: new(true), Shadow: &ShadowCaps{ModelConcurrency: map[string]int{"glm-5": 3, "glm-4.7": 2}}},
		},
		{name: "both shadow fields blank remove shadow", form: url.Values{"shadow.maxConcurrent": {" "}, "shadow.modelConcurrency": {""}}, want: Overrides{MaxConcurrent: new(8), Adaptive: new(true)}},
		{
			name: "adaptive checked with the cap blanked",
			form: url.Values{"adaptive": {"false", "true"}, "maxConcurrent": {""}},
			wantErrs: FieldErrors{
				{Field: "rateLimitOverrides.adaptive", Message: "needs a maxConcurrent of 1 or more (the learned cap stays between 1 and it)"},
			},
		},
		{
			name: "shadow problems on their fields",
			form: url.Values{"shadow.maxConcurrent": {"two"}, "shadow.modelConcurrency": {"glm-5=0\nx"}},
			wantErrs: FieldErrors{
				{Field: "rateLimitOverrides.shadow.maxConcurrent", Message: "must be a whole number from 0 to 10000"},
				{Field: "rateLimitOverrides.shadow.modelConcurrency", Message: `line 1: "glm-5=0": cap must be a whole number from 1 to 10000`},
				{Field: "rateLimitOverrides.shadow.modelConcurrency", Message: `line 2: "x": expected model=cap, like glm-5=2`},
			},
		},
	}
	runFormCases(t, base, tests)
}
