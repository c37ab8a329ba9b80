package limits

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseModelCaps(t *testing.T) {
	t.Parallel()
	const capMsg = "cap must be a whole number from 1 to 10000"
	const nameMsg = "model name must be 1 to 128 characters, with no spaces, '=' or ','"
	key128 := strings.Repeat("k", 128)
	key129 := strings.Repeat("k", 129)
	tests := []struct {
		name     string
		in       string
		want     map[string]int
		wantErrs []LineError
	}{
		{name: "empty text", in: "", want: nil},
		{name: "only blank lines and spaces", in: "\n  \n\t\n", want: nil},
		{name: "one per line", in: "glm-5=1\nglm-4.7=3", want: map[string]int{"glm-5": 1, "glm-4.7": 3}},
		{name: "commas separate too", in: "glm-5=1, glm-4.7=3,\nzai/x=2,", want: map[string]int{"glm-5": 1, "glm-4.7": 3, "zai/x": 2}},
		{name: "whitespace trimmed everywhere", in: "  glm-5 =  1 \r\n\t glm-4.7= 3\t\r\n", want: map[string]int{"glm-5": 1, "glm-4.7": 3}},
		{name: "blank lines ignored", in: "\n\nglm-5=1\n\n\nglm-4.7=3\n\n", want: map[string]int{"glm-5": 1, "glm-4.7": 3}},
		{name: "bounds", in: "a=1\nb=10000\n" + key128 + "=5", want: map[string]int{"a": 1, "b": 10000, key128: 5}},
		{name: "whole numbers in JSON spellings", in: "a=2.0\nb=1e3", want: map[string]int{"a": 2, "b": 1000}},
		{name: "bad cap", in: "glm-4.7=3\nglm-5=0", wantErrs: []LineError{{Line: 2, Entry: "glm-5=0", Message: capMsg}}},
		{
			name: "every bad entry with its line",
			in:   "glm-5=0\nok=2\n\nx=-1, y=1.5\nz=two\nbig=10001\nnoequals\n=4\n" + key129 + "=1\na b=1\nw=",
			wantErrs: []LineError{
				{Line: 1, Entry: "glm-5=0", Message: capMsg},
				{Line: 4, Entry: "x=-1", Message: capMsg},
				{Line: 4, Entry: "y=1.5", Message: capMsg},
				{Line: 5, Entry: "z=two", Message: capMsg},
				{Line: 6, Entry: "big=10001", Message: capMsg},
				{Line: 7, Entry: "noequals", Message: "expected model=cap, like glm-5=2"},
				{Line: 8, Entry: "=4", Message: "model name is missing before '='"},
				{Line: 9, Entry: key129 + "=1", Message: nameMsg},
				{Line: 10, Entry: "a b=1", Message: nameMsg},
				{Line: 11, Entry: "w=", Message: capMsg},
			},
		},
		{
			name: "duplicates are errors on the later line",
			in:   "glm-5=1\nglm-4.7=2\nglm-5=3, glm-4.7 = 2",
			wantErrs: []LineError{
				{Line: 3, Entry: "glm-5=3", Message: `model "glm-5" is already capped on line 1`},
				{Line: 3, Entry: "glm-4.7 = 2", Message: `model "glm-4.7" is already capped on line 2`},
			},
		},
		{name: "two equals signs", in: "a=b=1", wantErrs: []LineError{{Line: 1, Entry: "a=b=1", Message: capMsg}}},
		{name: "bad name and bad cap on one entry", in: "a b=0", wantErrs: []LineError{{Line: 1, Entry: "a b=0", Message: nameMsg}, {Line: 1, Entry: "a b=0", Message: capMsg}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := ParseModelCaps(tt.in)
			if diff := cmp.Diff(tt.wantErrs, errs, ignoreCodes); diff != "" {
				t.Errorf("ParseModelCaps(%q) errors mismatch (-want +got):\n%s", tt.in, diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseModelCaps(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestLineErrorText(t *testing.T) {
	t.Parallel()
	_, errs := ParseModelCaps("ok=1\nglm-5=0\nbad")
	want := `line 2: "glm-5=0": cap must be a whole number from 1 to 10000` + "\n" +
		`line 3: "bad": expected model=cap, like glm-5=2`
	if got := LineErrors(errs).Error(); got != want {
		t.Errorf("LineErrors.Error() =\n%s\nwant\n%s", got, want)
	}
}

func TestFormatModelCaps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   map[string]int
		want string
	}{
		{name: "nil", in: nil, want: ""},
		{name: "empty", in: map[string]int{}, want: ""},
		{name: "sorted, one a line, no trailing newline", in: map[string]int{"glm-5": 1, "glm-4.7": 3, "a": 10000}, want: "a=10000\nglm-4.7=3\nglm-5=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := FormatModelCaps(tt.in)
			if got != tt.want {
				t.Errorf("FormatModelCaps() = %q, want %q", got, tt.want)
			}
			back, errs := ParseModelCaps(got)
			if errs != nil {
				t.Fatalf("ParseModelCaps(FormatModelCaps()) errors: %v", errs)
			}
			if len(tt.in) == 0 {
				if back != nil {
					t.Errorf("ParseModelCaps(%q) = %v, want nil", got, back)
				}
				return
			}
			if diff := cmp.Diff(tt.in, back); diff != "" {
				t.Errorf("Parse(Format(m)) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCapRangeMatchesConstants(t *testing.T) {
	t.Parallel()
	lo, hi, ok := parseRange(capRange)
	if !ok || lo != MinCap || hi != MaxCap {
		t.Errorf("capRange %q does not match MinCap %d and MaxCap %d", capRange, MinCap, MaxCap)
	}
	// The JSON rule and the text rule agree at the edges.
	for _, tt := range []struct {
		cap  string
		want bool
	}{{"0", false}, {"1", true}, {"10000", true}, {"10001", false}} {
		_, jsonErrs := DecodeOverrides([]byte(`{"modelConcurrency":{"m":`+tt.cap+`}}`), "")
		_, textErrs := ParseModelCaps("m=" + tt.cap)
		if (jsonErrs == nil) != tt.want || (textErrs == nil) != tt.want {
			t.Errorf("cap %s: JSON accepted %v, text accepted %v, want %v", tt.cap, jsonErrs == nil, textErrs == nil, tt.want)
		}
	}
}

// TestModelCapsLimit: a connection caps at most MaxModelCaps models, in JSON
// (one error on the map itself) and in the textarea (one error, on the line of
// the first model too many).
func TestModelCapsLimit(t *testing.T) {
	t.Parallel()
	lines := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "m%d=1\n", i)
		}
		return b.String()
	}
	doc := func(n int) []byte {
		caps, errs := ParseModelCaps(lines(n))
		if errs != nil {
			t.Fatalf("ParseModelCaps(%d lines): %v", n, errs)
		}
		data, err := json.Marshal(Overrides{ModelConcurrency: caps})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if o, errs := DecodeOverrides(doc(MaxModelCaps), "rateLimitOverrides"); errs != nil || len(o.ModelConcurrency) != MaxModelCaps {
		t.Fatalf("%d caps: %d kept, errors %v", MaxModelCaps, len(o.ModelConcurrency), errs)
	}
	caps := map[string]int{}
	for i := range MaxModelCaps + 1 {
		caps[fmt.Sprintf("m%d", i)] = 1
	}
	big, err := json.Marshal(Overrides{ModelConcurrency: caps})
	if err != nil {
		t.Fatal(err)
	}
	_, errs := DecodeOverrides(big, "rateLimitOverrides")
	want := FieldErrors{{Field: "rateLimitOverrides.modelConcurrency", Message: "must have at most 500 items", Code: CodeAtMost + CodeSuffixItems, Args: []any{int64(500)}}}
	if diff := cmp.Diff(want, errs); diff != "" {
		t.Errorf("%d caps as JSON (-want +got):\n%s", MaxModelCaps+1, diff)
	}
	// Shadow caps follow the same rule.
	shadow, err := json.Marshal(Overrides{Shadow: &ShadowCaps{ModelConcurrency: caps}})
	if err != nil {
		t.Fatal(err)
	}
	_, errs = DecodeOverrides(shadow, "rateLimitOverrides")
	want[0].Field = "rateLimitOverrides.shadow.modelConcurrency"
	if diff := cmp.Diff(want, errs); diff != "" {
		t.Errorf("%d shadow caps as JSON (-want +got):\n%s", MaxModelCaps+1, diff)
	}

	got, lineErrs := ParseModelCaps(lines(MaxModelCaps + 3))
	wantLines := []LineError{{Line: MaxModelCaps + 1, Entry: fmt.Sprintf("m%d=1", MaxModelCaps),
		Message: "at most 500 models can be capped on one connection", Code: CodeTooManyModels, Args: []any{MaxModelCaps}}}
	if diff := cmp.Diff(wantLines, lineErrs); got != nil || diff != "" {
		t.Errorf("%d lines: map %d entries, errors (-want +got):\n%s", MaxModelCaps+3, len(got), diff)
	}
	// The form reports it on the field, as the textarea's line error.
	_, fe := ApplyForm(Overrides{}, url.Values{KeyModelConcurrency: {lines(MaxModelCaps + 1)}}, "rateLimitOverrides")
	if len(fe) != 1 || fe[0].Field != "rateLimitOverrides.modelConcurrency" || fe[0].Code != CodeLine {
		t.Errorf("ApplyForm with %d caps: %v", MaxModelCaps+1, fe)
	}
}
