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

// TestParseUSDDigits: 18 significant digits are read exactly, 19 are not (an
// exponent counts its zeros); every digit is a digit, 9 included.
func TestParseUSDDigits(t *testing.T) {
	t.Parallel()
	if got, ok := ParseUSD("123456789012.345678"); !ok || got != 123456789012345678 {
		t.Errorf(`ParseUSD("123456789012.345678") = %d, %v; want 123456789012345678, true`, got, ok)
	}
	if got, ok := ParseUSD("9.99"); !ok || got != 9_990_000 {
		t.Errorf(`ParseUSD("9.99") = %d, %v; want 9990000, true`, got, ok)
	}
	for _, in := range []string{"9e12", "1234567890123.456789"} {
		if got, ok := ParseUSD(in); ok {
			t.Errorf("ParseUSD(%q) = %d, true; want not ok (19 digits of micros)", in, got)
		}
	}
}

// TestCostSaturatesAtTheEdges: a cost whose micro-dollars reach 2^63 exactly, or
// whose product of tokens and price reaches 10^6 × 2^64 exactly, saturates at
// the largest Micros instead of wrapping or failing.
func TestCostSaturatesAtTheEdges(t *testing.T) {
	t.Parallel()
	const maxMicros = Micros(1<<63 - 1)
	for _, tc := range []struct {
		name   string
		tokens int64
		price  Micros
	}{
		{"2^63 µ$ exactly", 1 << 40, 15625 << 29},
		{"10^6 × 2^64 exactly", 1 << 40, 1_000_000 << 24},
	} {
		if got := (Rate{Input: tc.price}).Cost(tc.tokens, 0, 0, 0); got != maxMicros {
			t.Errorf("%s: Cost = %d, want %d", tc.name, got, maxMicros)
		}
	}
}
