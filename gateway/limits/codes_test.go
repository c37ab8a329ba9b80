package limits

import (
	"net/url"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// ignoreCodes compares problems by field and English message only; the codes
// have tests of their own below.
var ignoreCodes = cmp.Options{
	cmpopts.IgnoreFields(FieldError{}, "Code", "Args"),
	cmpopts.IgnoreFields(LineError{}, "Code", "Args"),
}

// coded is a problem as a translation sees it.
type coded struct {
	Field string
	Code  string
	Args  []any
}

func codesOf(fe FieldErrors) []coded {
	out := make([]coded, 0, len(fe))
	for _, e := range fe {
		out = append(out, coded{Field: e.Field, Code: e.Code, Args: e.Args})
	}
	return out
}

func TestFieldErrorCodes(t *testing.T) {
	t.Parallel()
	decode := func(doc string) FieldErrors {
		_, errs := DecodeOverrides([]byte(doc), "o")
		return errs
	}
	settings := func(doc string) FieldErrors {
		_, errs := DecodeSettings([]byte(doc), "s")
		return errs
	}
	tests := []struct {
		name string
		errs FieldErrors
		want []coded
	}{
		{
			name: "ranges, caps, model keys, unknown fields",
			errs: decode(`{"maxWaitMs":120001,"modelConcurrency":{"glm-5":0,"a b":1},"tmp":1,"rpm":1.5}`),
			want: []coded{
				{"o.maxWaitMs", CodeWholeNumberRange, []any{int64(0), int64(120000)}},
				{"o.modelConcurrency.a b", CodeModelKey, []any{MaxModelKeyLen}},
				{"o.modelConcurrency.glm-5", CodeCapRange, []any{int64(1), int64(10000)}},
				{"o.rpm", CodeWholeNumberRange, []any{int64(0), int64(1000000)}},
				{"o.tmp", CodeUnknownField, nil},
			},
		},
		{name: "not JSON", errs: decode(`{`), want: []coded{{"o", CodeNotJSON, nil}}},
		{name: "not an object", errs: decode(`[]`), want: []coded{{"o", CodeNotObject, nil}}},
		{name: "model map", errs: decode(`{"modelConcurrency":[1]}`), want: []coded{{"o.modelConcurrency", CodeNotModelMap, nil}}},
		{name: "duplicate key", errs: decode(`{"rpm":1,"rpm":2}`), want: []coded{{"o.rpm", CodeDuplicateField, nil}}},
		{
			name: "settings",
			errs: settings(`{"maxAttempts":0,"providers":{"Bad":{"maxConcurrent":1}}}`),
			want: []coded{
				{"s.maxAttempts", CodeWholeNumberRange, []any{int64(1), int64(10)}},
				{"s.providers.Bad", CodeProviderKey, []any{maxProviderKeyLen}},
			},
		},
		{name: "provider map", errs: settings(`{"providers":1}`), want: []coded{{"s.providers", CodeNotProviderMap, nil}}},
		{
			name: "stored overrides read fail-open",
			errs: func() FieldErrors {
				_, errs := NormalizeErrors([]byte(`{"maxConcurrent":-1,"x":1}`))
				return errs
			}(),
			want: []coded{
				{"rateLimitOverrides.maxConcurrent", CodeWholeNumberRange, []any{int64(0), int64(10000)}},
				{"rateLimitOverrides.x", CodeUnknownField, nil},
			},
		},
		{
			name: "stored settings read fail-open",
			errs: func() FieldErrors {
				_, errs := NormalizeSettingsErrors([]byte(`{"maxAttempts":0}`))
				return errs
			}(),
			want: []coded{{"settings.maxAttempts", CodeWholeNumberRange, []any{int64(1), int64(10)}}},
		},
		{
			name: "validator rules",
			errs: TranslateValidation(Validator().Struct(apiConnection{Provider: "p", BaseURL: "x", Models: []string{""}, Style: "grpc",
				Name: "n"}), ""),
			want: []coded{
				{"apiStyle", CodeOneOf, []any{"openai, anthropic"}},
				{"baseUrl", CodeURL, nil},
				{"models.0", CodeLengthRange, []any{int64(1), int64(128)}},
			},
		},
		{
			name: "item counts",
			errs: TranslateValidation(Validator().Struct(apiConnection{Name: "n", Provider: "p", BaseURL: "http://h", Style: "openai"}), ""),
			want: []coded{{"models", CodeAtLeast + CodeSuffixItems, []any{int64(1)}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, codesOf(tt.errs)); diff != "" {
				t.Errorf("codes mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLineErrorCodes(t *testing.T) {
	t.Parallel()
	_, errs := ParseModelCaps("glm-5=0\nnope\n=1\na b=1\nglm-5=2")
	type lineCode struct {
		Line int
		Code string
		Args []any
	}
	var got []lineCode
	for _, e := range errs {
		got = append(got, lineCode{e.Line, e.Code, e.Args})
	}
	want := []lineCode{
		{1, CodeCapRange, []any{int64(MinCap), int64(MaxCap)}},
		{2, CodeLineShape, nil},
		{3, CodeModelMissing, nil},
		{4, CodeModelKey, []any{MaxModelKeyLen}},
		{5, CodeDuplicateModel, []any{"glm-5", 1}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("line codes mismatch (-want +got):\n%s", diff)
	}
}

// TestApplyFormLineCode checks that a textarea problem carries its line, so the
// dashboard can word the whole line error.
func TestApplyFormLineCode(t *testing.T) {
	t.Parallel()
	_, errs := ApplyForm(Overrides{}, url.Values{KeyModelConcurrency: {"ok=1\nglm-5=0"}}, "o")
	if len(errs) != 1 || errs[0].Code != CodeLine || len(errs[0].Args) != 1 {
		t.Fatalf("ApplyForm errors = %#v, want one %q error with the LineError as its argument", errs, CodeLine)
	}
	le, ok := errs[0].Args[0].(LineError)
	if !ok {
		t.Fatalf("argument is %T, want LineError", errs[0].Args[0])
	}
	if le.Line != 2 || le.Entry != "glm-5=0" || le.Code != CodeCapRange {
		t.Errorf("line error = %+v, want line 2, entry glm-5=0, code %q", le, CodeCapRange)
	}
	if errs[0].Message != le.Error() {
		t.Errorf("message %q, want the line error's %q", errs[0].Message, le.Error())
	}
}

// TestEveryCodeListed words every rule describe knows, for every kind of value,
// and every plain problem, and checks that each code is in Codes.
func TestEveryCodeListed(t *testing.T) {
	t.Parallel()
	codes := Codes()
	if len(slices.Compact(slices.Sorted(slices.Values(codes)))) != len(codes) {
		t.Errorf("Codes() holds a code twice: %v", codes)
	}
	tags := []string{tagBetween, tagCap, tagModelKey, tagProviderKey, "required", "required_if", "min", "gte", "max", "lte",
		"gt", "lt", "len", "oneof", "url", "http_url", "email", "uuid", "alphanum", "unique", "excludesall", "contains", "custom"}
	params := []string{"", "1", "2", "1:10", "a b"}
	kinds := []reflect.Kind{reflect.Int, reflect.String, reflect.Slice, reflect.Map, reflect.Bool}
	for _, tag := range tags {
		for _, param := range params {
			for _, kind := range kinds {
				m := describe(tag, param, kind)
				if !slices.Contains(codes, m.code) {
					t.Errorf("describe(%q, %q, %v) has code %q, which Codes() does not list", tag, param, kind, m.code)
				}
			}
		}
	}
	for _, code := range append(slices.Clone(codes), "no-such-code") {
		if m := plainMessage(code); !slices.Contains(codes, m.code) || m.text == "" {
			t.Errorf("plainMessage(%q) = %+v", code, m)
		}
	}
}
