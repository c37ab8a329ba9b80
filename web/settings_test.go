package web

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// TestProviderLineErrorMessage: the per-provider codec's errors (parsed in
// limits, with limits' ranges) are worded by the catalogs, the part of the line
// they concern first.
func TestProviderLineErrorMessage(t *testing.T) {
	t.Parallel()
	_, errs := limits.ParseProviderCaps("zai 8\nopenai x\nzai 1\nanthropic 1 999999\nlonely")
	if len(errs) != 4 {
		t.Fatalf("got %d errors, want 4: %v", len(errs), errs)
	}
	for _, tt := range []struct {
		locale string
		want   []string
	}{
		{"en", []string{
			`line 2: "openai x": maxConcurrent must be a whole number from 0 to 100000`,
			`line 3: "zai 1": provider "zai" is already listed on line 1`,
			`line 4: "anthropic 1 999999": maxWaitMs must be a whole number from 0 to 120000`,
			`line 5: "lonely": write provider, maxConcurrent and optionally maxWaitMs, separated by spaces`,
		}},
		{"pt-BR", []string{
			`linha 2: "openai x": maxConcurrent deve ser um número inteiro de 0 a 100000`,
			`linha 3: "zai 1": o provedor "zai" já está na linha 1`,
			`linha 4: "anthropic 1 999999": maxWaitMs deve ser um número inteiro de 0 a 120000`,
			`linha 5: "lonely": escreva provedor, maxConcurrent e, se quiser, maxWaitMs, separados por espaços`,
		}},
	} {
		l := NewLocalizer(tt.locale)
		for i, e := range errs {
			if got := LineErrorMessage(l, e); got != tt.want[i] {
				t.Errorf("%s: LineErrorMessage = %q, want %q", tt.locale, got, tt.want[i])
			}
		}
	}
}
