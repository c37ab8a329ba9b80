package web

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseProviderCaps(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		text     string
		want     map[string]ProviderCap
		wantErrs []LineError
	}{
		{name: "empty", text: "", want: map[string]ProviderCap{}},
		{
			name: "two providers",
			text: "zai 8 30000\n\n  openai\t4  \r\n# comment\n",
			want: map[string]ProviderCap{"zai": {MaxConcurrent: 8, MaxWaitMs: 30000}, "openai": {MaxConcurrent: 4}},
		},
		{
			name: "every bad line reported",
			text: "zai 8\nZai 2\nopenai x\nzai 3\nanthropic 1 999999\nlonely\nx 1 2 3",
			wantErrs: []LineError{
				{Line: 2, Text: "Zai 2", Problem: "lines.providerName"},
				{Line: 3, Text: "openai x", Problem: "lines.providerMaxConcurrent"},
				{Line: 4, Text: "zai 3", Problem: "lines.providerDuplicate"},
				{Line: 5, Text: "anthropic 1 999999", Problem: "lines.providerMaxWaitMs"},
				{Line: 6, Text: "lonely", Problem: "lines.providerShape"},
				{Line: 7, Text: "x 1 2 3", Problem: "lines.providerShape"},
			},
		},
		{
			name:     "negative and fractions rejected",
			text:     "a -1\nb 1.5\nc +2",
			wantErrs: []LineError{{Line: 1, Text: "a -1", Problem: "lines.providerMaxConcurrent"}, {Line: 2, Text: "b 1.5", Problem: "lines.providerMaxConcurrent"}, {Line: 3, Text: "c +2", Problem: "lines.providerMaxConcurrent"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := ParseProviderCaps(tt.text)
			if diff := cmp.Diff(tt.wantErrs, errs); diff != "" {
				t.Fatalf("errors mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("caps mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProviderCapsRoundTrip(t *testing.T) {
	t.Parallel()
	caps := map[string]ProviderCap{"zai": {MaxConcurrent: 8, MaxWaitMs: 30000}, "openai": {MaxConcurrent: 0}, "a-b": {MaxConcurrent: 10000}}
	text := FormatProviderCaps(caps)
	if want := "a-b 10000\nopenai 0\nzai 8 30000\n"; text != want {
		t.Errorf("FormatProviderCaps = %q, want %q", text, want)
	}
	got, errs := ParseProviderCaps(text)
	if errs != nil {
		t.Fatalf("parse formatted: %v", errs)
	}
	if diff := cmp.Diff(caps, got); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
}

func TestLineErrorMessage(t *testing.T) {
	t.Parallel()
	e := LineError{Line: 2, Text: "openai x", Problem: "lines.providerMaxConcurrent"}
	want := `line 2: "openai x": maxConcurrent must be a whole number from 0 to 10000`
	if got := e.Message(NewLocalizer("en")); got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
	wantPT := `linha 2: "openai x": maxConcurrent deve ser um número inteiro de 0 a 10000`
	if got := e.Message(NewLocalizer("pt-BR")); got != wantPT {
		t.Errorf("Message pt-BR = %q, want %q", got, wantPT)
	}
}
