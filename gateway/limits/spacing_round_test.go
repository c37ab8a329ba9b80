package limits

import (
	"strings"
	"testing"
	"time"
)

// TestClientKeyDispatchSpacingRoundsUp: 60000/rpm ms, rounded up to the
// nanosecond only when it does not divide: rpm 60 is exactly a second, rpm 7
// 8.571428572 s; no rpm, no spacing.
func TestClientKeyDispatchSpacingRoundsUp(t *testing.T) {
	t.Parallel()
	for rpm, want := range map[int]time.Duration{60: time.Second, 7: 8571428572, 1: time.Minute, 0: 0} {
		if got := (EffectiveClientKey{RPM: rpm}).DispatchSpacing(); got != want {
			t.Errorf("rpm %d: spacing %v, want %v", rpm, got, want)
		}
	}
}

// TestParseUSDBounds: the bounds of a dollar amount's text are inclusive: 40
// characters, exponents of ±30 (a zero may carry either).
func TestParseUSDBounds(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Micros{
		"1." + strings.Repeat("0", 38): 1_000_000,
		"0e30":                         0,
		"0e-30":                        0,
		"0E+30":                        0,
	} {
		if got, ok := ParseUSD(in); !ok || got != want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d, true", in, got, ok, want)
		}
	}
	for _, in := range []string{"1." + strings.Repeat("0", 39), "0e31", "0e-31"} {
		if got, ok := ParseUSD(in); ok {
			t.Errorf("ParseUSD(%q) = %d, true; want not ok", in, got)
		}
	}
}
