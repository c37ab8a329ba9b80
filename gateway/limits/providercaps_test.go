package limits

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseProviderCaps(t *testing.T) {
	t.Parallel()
	const (
		mcMsg    = "maxConcurrent must be a whole number from 0 to 100000"
		mwMsg    = "maxWaitMs must be a whole number from 0 to 120000"
		nameMsg  = "provider name must be 1 to 32 characters of a-z, 0-9 and '-'"
		shapeMsg = "write provider, maxConcurrent and optionally maxWaitMs, separated by spaces"
	)
	tests := []struct {
		name     string
		text     string
		want     map[string]ProviderSettings
		wantErrs []LineError
	}{
		{name: "empty", text: ""},
		{name: "only blank lines and comments", text: "\n  \n# zai 8\n"},
		{
			name: "two providers",
			text: "zai 8 30000\n\n  openai\t4  \r\n# comment\n",
			want: map[string]ProviderSettings{"zai": {MaxConcurrent: new(8), MaxWaitMs: new(30000)}, "openai": {MaxConcurrent: new(4)}},
		},
		{
			// The settings validator's ranges, not narrower ones: 20000 is valid
			// through PATCH /api/v1/settings, so it is valid here.
			name: "the settings validator's bounds",
			text: "a 100000 120000\nb 20000\nc 0 0\nd 1e3 2.0",
			want: map[string]ProviderSettings{
				"a": {MaxConcurrent: new(100000), MaxWaitMs: new(120000)}, "b": {MaxConcurrent: new(20000)},
				"c": {MaxConcurrent: new(0), MaxWaitMs: new(0)}, "d": {MaxConcurrent: new(1000), MaxWaitMs: new(2)},
			},
		},
		{
			name: "every bad line reported",
			text: "zai 8\nZai 2\nopenai x\nzai 3\nanthropic 1 999999\nlonely\nx 1 2 3\nbig 100001",
			wantErrs: []LineError{
				{Line: 2, Entry: "Zai 2", Message: nameMsg},
				{Line: 3, Entry: "openai x", Key: "maxConcurrent", Message: mcMsg},
				{Line: 4, Entry: "zai 3", Message: `provider "zai" is already listed on line 1`},
				{Line: 5, Entry: "anthropic 1 999999", Key: "maxWaitMs", Message: mwMsg},
				{Line: 6, Entry: "lonely", Message: shapeMsg},
				{Line: 7, Entry: "x 1 2 3", Message: shapeMsg},
				{Line: 8, Entry: "big 100001", Key: "maxConcurrent", Message: mcMsg},
			},
		},
		{
			name: "negatives, fractions and signs rejected",
			text: "a -1\nb 1.5\nc +2 -3\nd 1 -3",
			wantErrs: []LineError{
				{Line: 1, Entry: "a -1", Key: "maxConcurrent", Message: mcMsg},
				{Line: 2, Entry: "b 1.5", Key: "maxConcurrent", Message: mcMsg},
				{Line: 3, Entry: "c +2 -3", Key: "maxConcurrent", Message: mcMsg},
				{Line: 4, Entry: "d 1 -3", Key: "maxWaitMs", Message: mwMsg},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := ParseProviderCaps(tt.text)
			if diff := cmp.Diff(tt.wantErrs, errs, cmpopts.IgnoreFields(LineError{}, "Code", "Args")); diff != "" {
				t.Fatalf("errors mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("caps mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProviderCapsRangesMatchSettings keeps the textarea and the settings
// validator in step: every value the codec accepts, DecodeSettings accepts,
// and the first value past each end is refused by both.
func TestProviderCapsRangesMatchSettings(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		line string
		doc  string
		ok   bool
	}{
		{"p 100000", `{"providers":{"p":{"maxConcurrent":100000}}}`, true},
		{"p 100001", `{"providers":{"p":{"maxConcurrent":100001}}}`, false},
		{"p 0 120000", `{"providers":{"p":{"maxConcurrent":0,"maxWaitMs":120000}}}`, true},
		{"p 0 120001", `{"providers":{"p":{"maxConcurrent":0,"maxWaitMs":120001}}}`, false},
		{"p -1", `{"providers":{"p":{"maxConcurrent":-1}}}`, false},
	} {
		_, lineErrs := ParseProviderCaps(tt.line)
		_, fieldErrs := DecodeSettings([]byte(tt.doc), "")
		if (lineErrs == nil) != tt.ok || (fieldErrs == nil) != tt.ok {
			t.Errorf("%q: codec errors %v, settings errors %v; want accepted = %v by both", tt.line, lineErrs, fieldErrs, tt.ok)
		}
	}
}

func TestFormatProviderCaps(t *testing.T) {
	t.Parallel()
	caps := map[string]ProviderSettings{
		"zai": {MaxConcurrent: new(8), MaxWaitMs: new(30000)}, "openai": {MaxConcurrent: new(0)},
		"a-b": {MaxConcurrent: new(20000)}, "w": {MaxWaitMs: new(5000)},
	}
	if got, want := FormatProviderCaps(caps), "a-b 20000\nopenai 0\nw 0 5000\nzai 8 30000"; got != want {
		t.Errorf("FormatProviderCaps = %q, want %q", got, want)
	}
	if got := FormatProviderCaps(nil); got != "" {
		t.Errorf("FormatProviderCaps(nil) = %q, want empty", got)
	}
}

// TestApplyProviderCaps: an unchanged line keeps its stored entry to the
// letter, a changed one takes the typed values.
func TestApplyProviderCaps(t *testing.T) {
	t.Parallel()
	stored := map[string]ProviderSettings{"w": {MaxWaitMs: new(5000)}, "zai": {MaxConcurrent: new(20000)}}
	got, errs := ApplyProviderCaps(stored, FormatProviderCaps(stored)+"\nopenai 3")
	if errs != nil {
		t.Fatal(errs)
	}
	want := map[string]ProviderSettings{"w": {MaxWaitMs: new(5000)}, "zai": {MaxConcurrent: new(20000)}, "openai": {MaxConcurrent: new(3)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ApplyProviderCaps mismatch (-want +got):\n%s", diff)
	}
	got, _ = ApplyProviderCaps(stored, "w 2 5000")
	if diff := cmp.Diff(map[string]ProviderSettings{"w": {MaxConcurrent: new(2), MaxWaitMs: new(5000)}}, got); diff != "" {
		t.Errorf("changed line mismatch (-want +got):\n%s", diff)
	}
	if got, errs := ApplyProviderCaps(stored, "zai x"); got != nil || len(errs) != 1 {
		t.Errorf("bad text = %v, %v; want nil and one error", got, errs)
	}
}
