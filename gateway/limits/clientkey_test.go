package limits

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeClientKeyLimitsAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want ClientKeyLimits
	}{
		{name: "every key", in: `{"weight":3,"maxConcurrent":2,"maxWaitMs":5000,"rpm":60,"tpm":1e5,"tpd":1e10,"models":["openai/gpt-4o","glm-5","zai/*"]}`,
			want: ClientKeyLimits{Weight: new(3), MaxConcurrent: new(2), MaxWaitMs: new(5000), RPM: new(60), TPM: new(int64(100000)),
				TPD: new(int64(1e10)), Models: []string{"openai/gpt-4o", "glm-5", "zai/*"}}},
		{name: "bounds", in: `{"weight":1000,"maxConcurrent":10000,"maxWaitMs":120000,"rpm":1000000,"tpm":100000000}`,
			want: ClientKeyLimits{Weight: new(1000), MaxConcurrent: new(10000), MaxWaitMs: new(120000), RPM: new(1000000), TPM: new(int64(1e8))}},
		{name: "null document", in: `null`, want: ClientKeyLimits{}},
		{name: "null keys are absent", in: `{"weight":null,"models":null,"rpm":0}`, want: ClientKeyLimits{RPM: new(0)}},
		{name: "empty models normalised away", in: `{"models":[]}`, want: ClientKeyLimits{}},
		{name: "128-character model", in: `{"models":["` + strings.Repeat("m", 128) + `"]}`, want: ClientKeyLimits{Models: []string{strings.Repeat("m", 128)}}},
		{name: "500 models", in: `{"models":` + modelsJSON(500) + `}`, want: ClientKeyLimits{Models: modelList(500)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := DecodeClientKeyLimits([]byte(tt.in), "limits")
			if errs != nil {
				t.Fatalf("DecodeClientKeyLimits(%s) errors: %v", tt.in, errs)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DecodeClientKeyLimits(%s) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestDecodeClientKeyLimitsRejects(t *testing.T) {
	t.Parallel()
	pattern := "model must be 1 to 128 characters — provider/model, a bare model id or provider/* — with no spaces, '=' or ','"
	tests := []struct {
		name string
		in   string
		want FieldErrors
	}{
		{name: "weight 0", in: `{"weight":0}`, want: FieldErrors{{Field: "limits.weight", Message: "must be a whole number from 1 to 1000"}}},
		{name: "weight fraction", in: `{"weight":1.5}`, want: FieldErrors{{Field: "limits.weight", Message: "must be a whole number from 1 to 1000"}}},
		{name: "weight string", in: `{"weight":"2"}`, want: FieldErrors{{Field: "limits.weight", Message: "must be a whole number from 1 to 1000"}}},
		{name: "every bad field at once", in: `{"maxConcurrent":10001,"maxWaitMs":-1,"rpm":1000001,"tpm":1e9,"tpd":1e11,"extra":1}`, want: FieldErrors{
			{Field: "limits.extra", Message: "unknown field"},
			{Field: "limits.maxConcurrent", Message: "must be a whole number from 0 to 10000"},
			{Field: "limits.maxWaitMs", Message: "must be a whole number from 0 to 120000"},
			{Field: "limits.rpm", Message: "must be a whole number from 0 to 1000000"},
			{Field: "limits.tpd", Message: "must be a whole number from 0 to 10000000000"},
			{Field: "limits.tpm", Message: "must be a whole number from 0 to 100000000"},
		}},
		{name: "models not a list", in: `{"models":"glm-5"}`, want: FieldErrors{{Field: "limits.models", Message: `must be a list of models, like ["openai/gpt-4o", "glm-5", "zai/*"]`}}},
		{name: "bad entries by index", in: `{"models":["ok",1,"","a b","*","Zai/*","zai/x*",` + fmt.Sprintf("%q", strings.Repeat("m", 129)) + `]}`, want: FieldErrors{
			{Field: "limits.models.1", Message: pattern}, {Field: "limits.models.2", Message: pattern},
			{Field: "limits.models.3", Message: pattern}, {Field: "limits.models.4", Message: pattern},
			{Field: "limits.models.5", Message: pattern}, {Field: "limits.models.6", Message: pattern},
			{Field: "limits.models.7", Message: pattern},
		}},
		{name: "duplicate model", in: `{"models":["a","b","a"]}`, want: FieldErrors{{Field: "limits.models.2", Message: "must not contain duplicates"}}},
		{name: "501 models", in: `{"models":` + modelsJSON(501) + `}`, want: FieldErrors{{Field: "limits.models", Message: "must have at most 500 items"}}},
		{name: "not an object", in: `[]`, want: FieldErrors{{Field: "limits", Message: "must be a JSON object"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := DecodeClientKeyLimits([]byte(tt.in), "limits")
			if !got.IsZero() {
				t.Errorf("DecodeClientKeyLimits(%s) returned limits %+v with errors", tt.in, got)
			}
			if diff := cmp.Diff(tt.want, errs, cmp.Comparer(func(a, b FieldError) bool {
				return a.Field == b.Field && a.Message == b.Message
			})); diff != "" {
				t.Errorf("DecodeClientKeyLimits(%s) errors mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestNormalizeClientKeyLimitsDropsOnlyTheBadParts(t *testing.T) {
	t.Parallel()
	got, warnings := NormalizeClientKeyLimits([]byte(`{"weight":0,"maxConcurrent":2,"models":["glm-5",7,"a b","zai/*"],"x":1}`))
	want := ClientKeyLimits{MaxConcurrent: new(2), Models: []string{"glm-5", "zai/*"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("limits mismatch (-want +got):\n%s", diff)
	}
	if len(warnings) != 4 || !strings.HasPrefix(warnings[0], "limits.models.1: ") || !strings.HasPrefix(warnings[3], "limits.x: ") {
		t.Errorf("warnings = %q, want four, for models.1, models.2, weight and x", warnings)
	}
	for _, raw := range []string{``, `null`} {
		if l, w := NormalizeClientKeyLimits([]byte(raw)); !l.IsZero() || w != nil {
			t.Errorf("NormalizeClientKeyLimits(%q) = %+v, %q; want nothing", raw, l, w)
		}
	}
	if l, w := NormalizeClientKeyLimits([]byte(`not json`)); !l.IsZero() || len(w) != 1 {
		t.Errorf("NormalizeClientKeyLimits(not json) = %+v, %q; want nothing and one warning", l, w)
	}
}

func TestClientKeyLimitsMergePatch(t *testing.T) {
	t.Parallel()
	stored := `{"weight":3,"maxConcurrent":2,"models":["glm-5"]}`
	merged, err := MergePatch([]byte(stored), []byte(`{"weight":null,"rpm":60,"models":["zai/*","glm-5"]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, errs := DecodeClientKeyLimits(merged, "limits")
	if errs != nil {
		t.Fatalf("decode %s: %v", merged, errs)
	}
	want := ClientKeyLimits{MaxConcurrent: new(2), RPM: new(60), Models: []string{"zai/*", "glm-5"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("merged limits mismatch (-want +got):\n%s", diff)
	}
}

func TestEffectiveClientKey(t *testing.T) {
	t.Parallel()
	e := ClientKeyLimits{}.Effective()
	if e.Weight != DefaultWeight || e.MaxConcurrent != 0 || e.DispatchSpacing() != 0 || !e.Models.All() {
		t.Errorf("Effective of no limits = %+v, want weight 1 and nothing else", e)
	}
	e = ClientKeyLimits{Weight: new(5), RPM: new(60), MaxWaitMs: new(250)}.Effective()
	if e.Weight != 5 || e.DispatchSpacing().Milliseconds() != 1000 || e.MaxWait().Milliseconds() != 250 {
		t.Errorf("Effective = %+v (spacing %v)", e, e.DispatchSpacing())
	}
}

func TestModelAllowlist(t *testing.T) {
	t.Parallel()
	a := NewModelAllowlist([]string{"openai/gpt-4o", "glm-5", "anthropic/*", "meta-llama/Llama-3"})
	tests := []struct {
		provider, id string
		want         bool
	}{
		{"openai", "gpt-4o", true},
		{"azure", "gpt-4o", false},
		{"zai", "glm-5", true},
		{"openai", "glm-5", true},
		{"anthropic", "claude-x", true},
		{"openai", "gpt-5", false},
		{"together", "meta-llama/Llama-3", true}, // a bare id with a slash
		{"meta-llama", "Llama-3", true},
	}
	for _, tt := range tests {
		if got := a.Allows(tt.provider, tt.id); got != tt.want {
			t.Errorf("Allows(%q, %q) = %v, want %v", tt.provider, tt.id, got, tt.want)
		}
	}
	if !(ModelAllowlist{}).Allows("x", "y") || !NewModelAllowlist(nil).All() {
		t.Error("the zero allowlist must allow every model")
	}
}

func FuzzDecodeClientKeyLimits(f *testing.F) {
	for _, seed := range []string{
		`{"weight":3,"models":["zai/*","glm-5"]}`, `{"models":["",1,"a a"]}`, `{"models":["a","a"]}`,
		`{"weight":0,"tpd":1e11}`, `null`, `[]`, `{"models":{}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		normalized, _ := NormalizeClientKeyLimits(data)
		nData, err := json.Marshal(normalized)
		if err != nil {
			t.Fatalf("Marshal(Normalize(%q)): %v", data, err)
		}
		if _, errs := DecodeClientKeyLimits(nData, ""); errs != nil {
			t.Fatalf("NormalizeClientKeyLimits(%q) = %s, which the strict decoder rejects: %v", data, nData, errs)
		}
		l, errs := DecodeClientKeyLimits(data, "limits")
		if errs != nil {
			return
		}
		again, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if l2, errs := DecodeClientKeyLimits(again, "limits"); errs != nil || !cmp.Equal(l, l2) {
			t.Fatalf("decode(marshal(decode(%q))) = %+v, %v; want %+v", data, l2, errs, l)
		}
	})
}

func modelList(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%d", i)
	}
	return out
}

func modelsJSON(n int) string {
	b, _ := json.Marshal(modelList(n))
	return string(b)
}
