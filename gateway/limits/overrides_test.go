package limits

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const prefix = "rateLimitOverrides"

func TestDecodeOverridesAccepts(t *testing.T) {
	t.Parallel()
	key128 := strings.Repeat("m", 128)
	tests := []struct {
		name string
		in   string
		want Overrides
	}{
		{
			name: "connection and model caps with scalars beside them",
			in:   `{"maxConcurrent":4,"modelConcurrency":{"glm-5":1,"glm-4.7":3},"rpm":60,"maxWaitMs":5000}`,
			want: Overrides{MaxConcurrent: new(4), ModelConcurrency: map[string]int{"glm-5": 1, "glm-4.7": 3}, RPM: new(60), MaxWaitMs: new(5000)},
		},
		{name: "executionMaxWaitMs alone", in: `{"executionMaxWaitMs":300000}`, want: Overrides{ExecutionMaxWaitMs: new(300000)}},
		{
			name: "executionMaxWaitMs with maxWaitMs",
			in:   `{"executionMaxWaitMs":300000,"maxWaitMs":30000}`,
			want: Overrides{ExecutionMaxWaitMs: new(300000), MaxWaitMs: new(30000)},
		},
		{name: "rpd alone", in: `{"rpd":500}`, want: Overrides{RPD: new(500)}},
		{
			name: "rpd with others",
			in:   `{"rpd":500,"rpm":10,"tpm":100000,"tpd":10000000000,"minTime":250,"maxQueueDepth":20}`,
			want: Overrides{RPD: new(500), RPM: new(10), TPM: new(int64(100000)), TPD: new(int64(10000000000)), MinTimeMs: new(250), MaxQueueDepth: new(20)},
		},
		{name: "cap 1 and cap 10000", in: `{"modelConcurrency":{"a":1,"b":10000}}`, want: Overrides{ModelConcurrency: map[string]int{"a": 1, "b": 10000}}},
		{name: "128-character model name", in: `{"modelConcurrency":{"` + key128 + `":2}}`, want: Overrides{ModelConcurrency: map[string]int{key128: 2}}},
		{name: "model names with slash, dot, colon and at", in: `{"modelConcurrency":{"zai/glm-5":1,"anthropic.claude-v1:0@x":2}}`, want: Overrides{ModelConcurrency: map[string]int{"zai/glm-5": 1, "anthropic.claude-v1:0@x": 2}}},
		{name: "whole numbers in other spellings", in: `{"maxConcurrent":4.0,"rpm":1e3,"rpd":10E-1,"minTime":-0,"maxWaitMs":0.25e4}`, want: Overrides{MaxConcurrent: new(4), RPM: new(1000), RPD: new(1), MinTimeMs: new(0), MaxWaitMs: new(2500)}},
		{name: "explicit zeros are kept", in: `{"maxConcurrent":0,"maxWaitMs":0}`, want: Overrides{MaxConcurrent: new(0), MaxWaitMs: new(0)}},
		{name: "null document is no overrides", in: `null`, want: Overrides{}},
		{name: "empty object", in: ` {} `, want: Overrides{}},
		{name: "null keys are absent", in: `{"maxConcurrent":null,"modelConcurrency":null,"rpm":7}`, want: Overrides{RPM: new(7)}},
		{name: "empty model map is normalised away", in: `{"modelConcurrency":{}}`, want: Overrides{}},
		{name: "null model entry is absent", in: `{"modelConcurrency":{"glm-5":null,"glm-4.7":2}}`, want: Overrides{ModelConcurrency: map[string]int{"glm-4.7": 2}}},
		{name: "upper bounds", in: `{"maxConcurrent":10000,"maxWaitMs":120000,"executionMaxWaitMs":600000,"maxQueueDepth":100000,"rpm":1000000,"rpd":10000000,"tpm":100000000,"tpd":1e10,"minTime":60000}`,
			want: Overrides{MaxConcurrent: new(10000), MaxWaitMs: new(120000), ExecutionMaxWaitMs: new(600000), MaxQueueDepth: new(100000), RPM: new(1000000), RPD: new(10000000), TPM: new(int64(100000000)), TPD: new(int64(1e10)), MinTimeMs: new(60000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := DecodeOverrides([]byte(tt.in), prefix)
			if errs != nil {
				t.Fatalf("DecodeOverrides(%s) errors: %v", tt.in, errs)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DecodeOverrides(%s) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestDecodeOverridesRejects(t *testing.T) {
	t.Parallel()
	key129 := strings.Repeat("m", 129)
	const capMsg = "cap must be a whole number from 1 to 10000"
	tests := []struct {
		name string
		in   string
		want FieldErrors
	}{
		{name: "negative rpd", in: `{"rpd":-10}`, want: FieldErrors{{Field: "rateLimitOverrides.rpd", Message: "must be a whole number from 0 to 10000000"}}},
		{name: "fractional rpd", in: `{"rpd":12.5}`, want: FieldErrors{{Field: "rateLimitOverrides.rpd", Message: "must be a whole number from 0 to 10000000"}}},
		{name: "string rpd", in: `{"rpd":"500"}`, want: FieldErrors{{Field: "rateLimitOverrides.rpd", Message: "must be a whole number from 0 to 10000000"}}},
		{
			name: "every bad cap, key and field reported in one call",
			in: `{"modelConcurrency":{"zero":0,"neg":-1,"frac":1.5,"str":"2","big":10001,"ok":1,"max":10000,"` +
				key129 + `":1,"":3},"tmp":1,"maxWaitMs":120001}`,
			want: FieldErrors{
				{Field: "rateLimitOverrides.maxWaitMs", Message: "must be a whole number from 0 to 120000"},
				{Field: "rateLimitOverrides.modelConcurrency.", Message: "model name must be 1 to 128 characters, with no spaces, '=' or ','"},
				{Field: "rateLimitOverrides.modelConcurrency.big", Message: capMsg},
				{Field: "rateLimitOverrides.modelConcurrency.frac", Message: capMsg},
				{Field: "rateLimitOverrides.modelConcurrency." + key129, Message: "model name must be 1 to 128 characters, with no spaces, '=' or ','"},
				{Field: "rateLimitOverrides.modelConcurrency.neg", Message: capMsg},
				{Field: "rateLimitOverrides.modelConcurrency.str", Message: capMsg},
				{Field: "rateLimitOverrides.modelConcurrency.zero", Message: capMsg},
				{Field: "rateLimitOverrides.tmp", Message: "unknown field"},
			},
		},
		{name: "model map as array", in: `{"modelConcurrency":[1,2]}`, want: FieldErrors{{Field: "rateLimitOverrides.modelConcurrency", Message: plainMessage(CodeNotModelMap).text}}},
		{name: "model map as string", in: `{"modelConcurrency":"glm-5=1"}`, want: FieldErrors{{Field: "rateLimitOverrides.modelConcurrency", Message: plainMessage(CodeNotModelMap).text}}},
		{name: "model key with dots is one path segment", in: `{"modelConcurrency":{"glm-4.7":0}}`, want: FieldErrors{{Field: "rateLimitOverrides.modelConcurrency.glm-4.7", Message: capMsg}}},
		{name: "model keys the textarea cannot carry", in: `{"modelConcurrency":{"a=b":1,"a,b":1,"a b":1,"a\tb":1}}`, want: FieldErrors{
			{Field: "rateLimitOverrides.modelConcurrency.a\tb", Message: "model name must be 1 to 128 characters, with no spaces, '=' or ','"},
			{Field: "rateLimitOverrides.modelConcurrency.a b", Message: "model name must be 1 to 128 characters, with no spaces, '=' or ','"},
			{Field: "rateLimitOverrides.modelConcurrency.a,b", Message: "model name must be 1 to 128 characters, with no spaces, '=' or ','"},
			{Field: "rateLimitOverrides.modelConcurrency.a=b", Message: "model name must be 1 to 128 characters, with no spaces, '=' or ','"},
		}},
		{name: "key and cap both wrong", in: `{"modelConcurrency":{"":0}}`, want: FieldErrors{
			{Field: "rateLimitOverrides.modelConcurrency.", Message: capMsg},
			{Field: "rateLimitOverrides.modelConcurrency.", Message: "model name must be 1 to 128 characters, with no spaces, '=' or ','"},
		}},
		{name: "wrong types", in: `{"maxConcurrent":true,"rpm":{"a":1},"tpm":[1],"minTime":"5"}`, want: FieldErrors{
			{Field: "rateLimitOverrides.maxConcurrent", Message: "must be a whole number from 0 to 10000"},
			{Field: "rateLimitOverrides.minTime", Message: "must be a whole number from 0 to 60000"},
			{Field: "rateLimitOverrides.rpm", Message: "must be a whole number from 0 to 1000000"},
			{Field: "rateLimitOverrides.tpm", Message: "must be a whole number from 0 to 100000000"},
		}},
		{name: "numbers beyond int64", in: `{"tpd":1e400,"maxConcurrent":-99999999999999999999}`, want: FieldErrors{
			{Field: "rateLimitOverrides.maxConcurrent", Message: "must be a whole number from 0 to 10000"},
			{Field: "rateLimitOverrides.tpd", Message: "must be a whole number from 0 to 10000000000"},
		}},
		{name: "tiny fraction is not whole", in: `{"rpm":1.0000000000000000000001}`, want: FieldErrors{{Field: "rateLimitOverrides.rpm", Message: "must be a whole number from 0 to 1000000"}}},
		{name: "over the top of each range", in: `{"maxConcurrent":10001,"executionMaxWaitMs":600001,"maxQueueDepth":100001,"rpm":1000001,"rpd":10000001,"tpm":100000001,"tpd":10000000001,"minTime":60001}`, want: FieldErrors{
			{Field: "rateLimitOverrides.executionMaxWaitMs", Message: "must be a whole number from 0 to 600000"},
			{Field: "rateLimitOverrides.maxConcurrent", Message: "must be a whole number from 0 to 10000"},
			{Field: "rateLimitOverrides.maxQueueDepth", Message: "must be a whole number from 0 to 100000"},
			{Field: "rateLimitOverrides.minTime", Message: "must be a whole number from 0 to 60000"},
			{Field: "rateLimitOverrides.rpd", Message: "must be a whole number from 0 to 10000000"},
			{Field: "rateLimitOverrides.rpm", Message: "must be a whole number from 0 to 1000000"},
			{Field: "rateLimitOverrides.tpd", Message: "must be a whole number from 0 to 10000000000"},
			{Field: "rateLimitOverrides.tpm", Message: "must be a whole number from 0 to 100000000"},
		}},
		{name: "duplicate keys", in: `{"rpm":1,"rpm":2,"modelConcurrency":{"a":1,"a":2}}`, want: FieldErrors{
			{Field: "rateLimitOverrides.modelConcurrency.a", Message: plainMessage(CodeDuplicateField).text},
			{Field: "rateLimitOverrides.rpm", Message: plainMessage(CodeDuplicateField).text},
		}},
		{name: "not JSON", in: `{"rpm":`, want: FieldErrors{{Field: "rateLimitOverrides", Message: plainMessage(CodeNotJSON).text}}},
		{name: "trailing data", in: `{} {}`, want: FieldErrors{{Field: "rateLimitOverrides", Message: plainMessage(CodeNotJSON).text}}},
		{name: "array document", in: `[]`, want: FieldErrors{{Field: "rateLimitOverrides", Message: plainMessage(CodeNotObject).text}}},
		{name: "number document", in: `4`, want: FieldErrors{{Field: "rateLimitOverrides", Message: plainMessage(CodeNotObject).text}}},
		{name: "empty input", in: ``, want: FieldErrors{{Field: "rateLimitOverrides", Message: plainMessage(CodeNotObject).text}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := DecodeOverrides([]byte(tt.in), prefix)
			if diff := cmp.Diff(tt.want, errs, ignoreCodes); diff != "" {
				t.Errorf("DecodeOverrides(%s) errors mismatch (-want +got):\n%s", tt.in, diff)
			}
			if diff := cmp.Diff(Overrides{}, got); diff != "" {
				t.Errorf("DecodeOverrides(%s) returned overrides despite errors (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestDecodeOverridesPathPrefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, prefix, want string
	}{
		{name: "no prefix", prefix: "", want: "modelConcurrency.glm-5"},
		{name: "nested prefix", prefix: "connection.rateLimitOverrides", want: "connection.rateLimitOverrides.modelConcurrency.glm-5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, errs := DecodeOverrides([]byte(`{"modelConcurrency":{"glm-5":0}}`), tt.prefix)
			want := FieldErrors{{Field: tt.want, Message: "cap must be a whole number from 1 to 10000"}}
			if diff := cmp.Diff(want, errs, ignoreCodes); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOverridesRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // exact marshalled form
	}{
		{name: "connection cap alone", in: `{"maxConcurrent":4}`, want: `{"maxConcurrent":4}`},
		{name: "explicit zero survives", in: `{"maxConcurrent":0}`, want: `{"maxConcurrent":0}`},
		{name: "empty", in: `{}`, want: `{}`},
		{
			name: "caps with scalars",
			in:   `{"maxConcurrent":4,"modelConcurrency":{"glm-5":1,"glm-4.7":3},"rpm":60,"maxWaitMs":30000}`,
			want: `{"maxConcurrent":4,"modelConcurrency":{"glm-4.7":3,"glm-5":1},"maxWaitMs":30000,"rpm":60}`,
		},
		{
			name: "every key",
			in:   `{"minTime":5,"tpd":6,"tpm":7,"rpd":8,"rpm":9,"maxQueueDepth":10,"executionMaxWaitMs":300000,"maxWaitMs":12,"modelConcurrency":{"m":13},"maxConcurrent":14}`,
			want: `{"maxConcurrent":14,"modelConcurrency":{"m":13},"maxWaitMs":12,"executionMaxWaitMs":300000,"maxQueueDepth":10,"rpm":9,"rpd":8,"tpm":7,"tpd":6,"minTime":5}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, errs := DecodeOverrides([]byte(tt.in), prefix)
			if errs != nil {
				t.Fatalf("DecodeOverrides: %v", errs)
			}
			out, err := json.Marshal(o)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(out) != tt.want {
				t.Errorf("Marshal = %s, want %s", out, tt.want)
			}
			if diff := cmp.Diff(jsonValue(t, tt.in), jsonValue(t, string(out))); diff != "" {
				t.Errorf("round trip changed the document (-in +out):\n%s", diff)
			}
		})
	}
}

func jsonValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("unmarshal %s: %v", s, err)
	}
	return v
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		in           string
		want         Overrides
		wantWarnings []string
	}{
		{name: "good document, no warnings", in: `{"maxConcurrent":4,"modelConcurrency":{"glm-5":1}}`, want: Overrides{MaxConcurrent: new(4), ModelConcurrency: map[string]int{"glm-5": 1}}},
		{name: "empty column", in: ``, want: Overrides{}},
		{name: "null", in: `null`, want: Overrides{}},
		{
			name: "hand-broken values dropped, good parts kept",
			in:   `{"maxConcurrent":"4","modelConcurrency":{"glm-5":0,"glm-4.7":3,"":2,"x":2.5,"y":2.0},"maxWaitMs":-5,"rpm":60,"tmp":1,"tpd":1e400}`,
			want: Overrides{ModelConcurrency: map[string]int{"glm-4.7": 3, "y": 2}, RPM: new(60)},
			wantWarnings: []string{
				"rateLimitOverrides.maxConcurrent: must be a whole number from 0 to 10000 (ignored)",
				"rateLimitOverrides.maxWaitMs: must be a whole number from 0 to 120000 (ignored)",
				"rateLimitOverrides.modelConcurrency.: model name must be 1 to 128 characters, with no spaces, '=' or ',' (ignored)",
				"rateLimitOverrides.modelConcurrency.glm-5: cap must be a whole number from 1 to 10000 (ignored)",
				"rateLimitOverrides.modelConcurrency.x: cap must be a whole number from 1 to 10000 (ignored)",
				"rateLimitOverrides.tmp: unknown field (ignored)",
				"rateLimitOverrides.tpd: must be a whole number from 0 to 10000000000 (ignored)",
			},
		},
		{
			name:         "every model cap broken leaves no map",
			in:           `{"modelConcurrency":{"a":0,"b":{"c":1}},"rpd":5}`,
			want:         Overrides{RPD: new(5)},
			wantWarnings: []string{"rateLimitOverrides.modelConcurrency.a: cap must be a whole number from 1 to 10000 (ignored)", "rateLimitOverrides.modelConcurrency.b: cap must be a whole number from 1 to 10000 (ignored)"},
		},
		{name: "model map of the wrong type", in: `{"modelConcurrency":[["glm-5",1]],"maxConcurrent":2}`, want: Overrides{MaxConcurrent: new(2)}, wantWarnings: []string{"rateLimitOverrides.modelConcurrency: " + plainMessage(CodeNotModelMap).text + " (ignored)"}},
		{name: "not JSON", in: `{maxConcurrent: 4}`, want: Overrides{}, wantWarnings: []string{"rateLimitOverrides: is not valid JSON (ignored)"}},
		{name: "array", in: `[4]`, want: Overrides{}, wantWarnings: []string{"rateLimitOverrides: must be a JSON object (ignored)"}},
		{name: "string", in: `"maxConcurrent=4"`, want: Overrides{}, wantWarnings: []string{"rateLimitOverrides: must be a JSON object (ignored)"}},
		{name: "duplicate key keeps the first", in: `{"rpm":1,"rpm":2}`, want: Overrides{RPM: new(1)}, wantWarnings: []string{"rateLimitOverrides.rpm: " + plainMessage(CodeDuplicateField).text + " (ignored)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, warnings := Normalize([]byte(tt.in))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Normalize(%s) mismatch (-want +got):\n%s", tt.in, diff)
			}
			if diff := cmp.Diff(tt.wantWarnings, warnings); diff != "" {
				t.Errorf("Normalize(%s) warnings mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestOverridesCloneAndIsZero(t *testing.T) {
	t.Parallel()
	o := Overrides{MaxConcurrent: new(4), ModelConcurrency: map[string]int{"a": 1}, TPD: new(int64(9))}
	c := o.Clone()
	*c.MaxConcurrent = 5
	c.ModelConcurrency["a"] = 2
	*c.TPD = 10
	want := Overrides{MaxConcurrent: new(4), ModelConcurrency: map[string]int{"a": 1}, TPD: new(int64(9))}
	if diff := cmp.Diff(want, o); diff != "" {
		t.Errorf("changing the clone changed the original (-want +got):\n%s", diff)
	}
	if o.IsZero() {
		t.Error("IsZero() = true for overrides that set keys")
	}
	if !(Overrides{ModelConcurrency: map[string]int{}}).IsZero() {
		t.Error("IsZero() = false for overrides with only an empty model map")
	}
}

func TestOverrideKeysMatchJSONNames(t *testing.T) {
	t.Parallel()
	all := Overrides{MaxConcurrent: new(1), ModelConcurrency: map[string]int{"m": 1}, MaxWaitMs: new(1), ExecutionMaxWaitMs: new(1),
		MaxQueueDepth: new(1), RPM: new(1), RPD: new(1), TPM: new(int64(1)), TPD: new(int64(1)), MinTimeMs: new(1),
		Adaptive: new(true), Shadow: &ShadowCaps{MaxConcurrent: new(1)}, Affinity: new(false), DrainAtPercent: new(90)}
	data, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	var keys []string
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' {
				depth++
			} else if v == '}' {
				depth--
			}
		case string:
			if depth == 1 {
				keys = append(keys, v)
			}
		}
	}
	if diff := cmp.Diff(OverrideKeys(), keys); diff != "" {
		t.Errorf("OverrideKeys() differ from the marshalled field order (-keys +json):\n%s", diff)
	}
}
