package web

import (
	"net/url"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// TestEveryLimitsCodeIsWorded fails when gateway/limits can report a problem the
// catalogs cannot word (the parity test then holds pt-BR to the same keys).
func TestEveryLimitsCodeIsWorded(t *testing.T) {
	t.Parallel()
	for _, code := range limits.Codes() {
		if !HasValidationMessage(code) {
			t.Errorf("code %q has no catalog entry validation.%s (or its .one/.other forms)", code, code)
		}
	}
}

func TestValidationMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		tag     string
		code    string
		args    []any
		english string
		want    string
	}{
		{name: "en range", tag: "en", code: limits.CodeWholeNumberRange, args: []any{int64(0), int64(120000)},
			english: "x", want: "must be a whole number from 0 to 120000"},
		{name: "pt range", tag: "pt-BR", code: limits.CodeWholeNumberRange, args: []any{int64(0), int64(120000)},
			english: "x", want: "deve ser um número inteiro de 0 a 120000"},
		{name: "pt cap", tag: "pt-BR", code: limits.CodeCapRange, args: []any{int64(1), int64(10000)},
			english: "x", want: "o limite deve ser um número inteiro de 1 a 10000"},
		{name: "pt unknown field", tag: "pt-BR", code: limits.CodeUnknownField, english: "unknown field", want: "campo desconhecido"},
		{name: "pt plural one", tag: "pt-BR", code: limits.CodeAtLeast + limits.CodeSuffixItems, args: []any{int64(1)},
			english: "x", want: "deve ter pelo menos 1 item"},
		{name: "en plural other", tag: "en", code: limits.CodeAtMost + limits.CodeSuffixItems, args: []any{int64(500)},
			english: "x", want: "must have at most 500 items"},
		{name: "pt duplicate model", tag: "pt-BR", code: limits.CodeDuplicateModel, args: []any{"glm-5", 1},
			english: "x", want: `o modelo "glm-5" já tem limite na linha 1`},
		{name: "no code keeps English", tag: "pt-BR", english: "is broken", want: "is broken"},
		{name: "unknown code keeps English", tag: "pt-BR", code: "noSuchCode", english: "is broken", want: "is broken"},
		{name: "arguments that do not fit keep English", tag: "pt-BR", code: limits.CodeCapRange, english: "cap is wrong", want: "cap is wrong"},
		{name: "plural without a count keeps English", tag: "en", code: limits.CodeAtLeast + limits.CodeSuffixItems, args: []any{"x"},
			english: "needs items", want: "needs items"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := ValidationMessage(NewLocalizer(tt.tag), tt.code, tt.args, tt.english); got != tt.want {
				t.Errorf("ValidationMessage = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFieldErrorMessageLines(t *testing.T) {
	t.Parallel()
	_, errs := limits.ApplyForm(limits.Overrides{}, url.Values{limits.KeyModelConcurrency: {"ok=1\nglm-5=0"}}, "rateLimitOverrides")
	if len(errs) != 1 {
		t.Fatalf("ApplyForm gave %d errors, want 1: %v", len(errs), errs)
	}
	tests := []struct {
		name string
		tag  string
		want string
	}{
		{name: "en", tag: "en", want: `line 2: "glm-5=0": cap must be a whole number from 1 to 10000`},
		{name: "pt-BR", tag: "pt-BR", want: `linha 2: "glm-5=0": o limite deve ser um número inteiro de 1 a 10000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := FieldErrorMessage(NewLocalizer(tt.tag), errs[0]); got != tt.want {
				t.Errorf("FieldErrorMessage = %q, want %q", got, tt.want)
			}
		})
	}
	if got, want := errs[0].Message, `line 2: "glm-5=0": cap must be a whole number from 1 to 10000`; got != want {
		t.Errorf("API message = %q, want %q", got, want)
	}
}
