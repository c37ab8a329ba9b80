package limits

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeSettingsAliases(t *testing.T) {
	t.Parallel()
	keyRule := describe(tagModelKey, "", 0).text
	tests := []struct {
		name     string
		in       string
		want     map[string]string
		wantErrs FieldErrors
	}{
		{name: "aliases", in: `{"aliases":{"fast":"zai/glm-5","gpt-5-mini":"glm-4.7"}}`, want: map[string]string{"fast": "zai/glm-5", "gpt-5-mini": "glm-4.7"}},
		{name: "null entry is absent", in: `{"aliases":{"fast":null}}`},
		{
			name: "an alias naming an alias, at its path",
			in:   `{"aliases":{"fast":"zai/glm-5","quick":"fast","self":"self"}}`,
			wantErrs: FieldErrors{
				{Field: "settings.aliases.quick", Message: `names the alias "fast"; an alias must name a model (provider/model or a bare id), not another alias`, Code: CodeAliasOfAlias, Args: []any{"fast"}},
				{Field: "settings.aliases.self", Message: `names the alias "self"; an alias must name a model (provider/model or a bare id), not another alias`, Code: CodeAliasOfAlias, Args: []any{"self"}},
			},
		},
		{
			name: "bad names and targets",
			in:   `{"aliases":{"a b":"x","ok":"has space","n":5,"e":""}}`,
			wantErrs: FieldErrors{
				{Field: "settings.aliases.a b", Message: keyRule, Code: CodeModelKey, Args: []any{MaxModelKeyLen}},
				{Field: "settings.aliases.e", Message: keyRule, Code: CodeModelKey, Args: []any{MaxModelKeyLen}},
				{Field: "settings.aliases.n", Message: keyRule, Code: CodeModelKey, Args: []any{MaxModelKeyLen}},
				{Field: "settings.aliases.ok", Message: keyRule, Code: CodeModelKey, Args: []any{MaxModelKeyLen}},
			},
		},
		{name: "not an object", in: `{"aliases":["fast"]}`, wantErrs: FieldErrors{{Field: "settings.aliases", Message: plainMessage(CodeNotAliasMap).text, Code: CodeNotAliasMap}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := DecodeSettings([]byte(tt.in), "settings")
			if diff := cmp.Diff(tt.wantErrs, errs); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got.Aliases); diff != "" {
				t.Errorf("aliases mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNormalizeSettingsAliases: a stored alias naming an alias is dropped
// with a warning, the others kept.
func TestNormalizeSettingsAliases(t *testing.T) {
	t.Parallel()
	s, warns := NormalizeSettings([]byte(`{"aliases":{"fast":"zai/glm-5","quick":"fast"}}`))
	if diff := cmp.Diff(map[string]string{"fast": "zai/glm-5"}, s.Aliases); diff != "" {
		t.Errorf("aliases mismatch (-want +got):\n%s", diff)
	}
	want := []string{`settings.aliases.quick: names the alias "fast"; an alias must name a model (provider/model or a bare id), not another alias (ignored)`}
	if diff := cmp.Diff(want, warns); diff != "" {
		t.Errorf("warnings mismatch (-want +got):\n%s", diff)
	}
	if got := s.Effective().Aliases; got["fast"] != "zai/glm-5" || len(got) != 1 {
		t.Errorf("Effective().Aliases = %v", got)
	}
}

func TestParseAliases(t *testing.T) {
	t.Parallel()
	keyRule := describe(tagModelKey, "", 0)
	tests := []struct {
		name     string
		in       string
		want     map[string]string
		wantErrs []LineError
	}{
		{name: "empty", in: " \n\n"},
		{name: "lines and commas", in: " fast = zai/glm-5 \r\nbig=glm-5, mini=gpt-5-mini\n", want: map[string]string{"fast": "zai/glm-5", "big": "glm-5", "mini": "gpt-5-mini"}},
		{
			name: "an alias naming an alias, at its line wherever the other is",
			in:   "quick=fast\nfast=zai/glm-5\nslow=quick",
			wantErrs: []LineError{
				{Line: 1, Entry: "quick=fast", Message: aliasOfAlias("fast").text, Code: CodeAliasOfAlias, Args: []any{"fast"}},
				{Line: 3, Entry: "slow=quick", Message: aliasOfAlias("quick").text, Code: CodeAliasOfAlias, Args: []any{"quick"}},
			},
		},
		{
			name: "every bad line",
			in:   "fast\nfast=zai/glm-5\nfast=glm-5\n=x\ny=\na b=c",
			wantErrs: []LineError{
				{Line: 1, Entry: "fast", Message: "expected alias=model, like fast=zai/glm-5", Code: CodeAliasLineShape},
				{Line: 3, Entry: "fast=glm-5", Message: `alias "fast" is already given on line 2`, Code: CodeDuplicateAlias, Args: []any{"fast", 2}},
				{Line: 4, Entry: "=x", Message: keyRule.text, Code: CodeModelKey, Args: keyRule.args},
				{Line: 5, Entry: "y=", Message: keyRule.text, Code: CodeModelKey, Args: keyRule.args},
				{Line: 6, Entry: "a b=c", Message: keyRule.text, Code: CodeModelKey, Args: keyRule.args},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := ParseAliases(tt.in)
			if diff := cmp.Diff(tt.wantErrs, errs); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("aliases mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAliasesLimit: at most MaxAliases aliases, in JSON (one error on the
// map) and in the textarea (one error, on the line of the first too many).
func TestAliasesLimit(t *testing.T) {
	t.Parallel()
	var text strings.Builder
	for i := range MaxAliases + 2 {
		fmt.Fprintf(&text, "a%d=m\n", i)
	}
	got, errs := ParseAliases(text.String())
	want := []LineError{{Line: MaxAliases + 1, Entry: fmt.Sprintf("a%d=m", MaxAliases), Message: "at most 500 aliases can be set", Code: CodeTooManyAliases, Args: []any{MaxAliases}}}
	if diff := cmp.Diff(want, errs); got != nil || diff != "" {
		t.Errorf("textarea: map of %d, errors (-want +got):\n%s", len(got), diff)
	}
	aliases := map[string]string{}
	for i := range MaxAliases + 1 {
		aliases[fmt.Sprintf("a%d", i)] = "m"
	}
	_, fe := marshalled(Settings{Aliases: aliases}, DecodeSettings)
	if len(fe) != 1 || fe[0].Field != "aliases" || fe[0].Code != CodeAtMost+CodeSuffixItems {
		t.Errorf("JSON with %d aliases: %v", MaxAliases+1, fe)
	}
	delete(aliases, "a0")
	if _, fe := marshalled(Settings{Aliases: aliases}, DecodeSettings); fe != nil {
		t.Errorf("JSON with %d aliases: %v", MaxAliases, fe)
	}
}

// FuzzParseAliases fuzzes the alias=model codec (see fuzzTextCodec).
func FuzzParseAliases(f *testing.F) {
	fuzzTextCodec(f, textCodec[string]{
		parse: ParseAliases, format: FormatAliases,
		decode: func(m map[string]string) ([]byte, FieldErrors) {
			return marshalled(Settings{Aliases: m}, DecodeSettings)
		},
	}, "", "fast=zai/glm-5\nbig=glm-5", "a=b,b=c", "a=a", " a = b \r\n\n", "a", "=b", "a=", "a=b\na=c")
}
