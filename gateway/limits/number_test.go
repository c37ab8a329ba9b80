package limits

import (
	"math"
	"strings"
	"testing"
)

func TestParseWhole(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    int64
		wantRes wholeResult
	}{
		{"0", 0, wholeOK},
		{"-0", 0, wholeOK},
		{"1", 1, wholeOK},
		{"1.0", 1, wholeOK},
		{"1.000", 1, wholeOK},
		{"1e3", 1000, wholeOK},
		{"1E+3", 1000, wholeOK},
		{"10e-1", 1, wholeOK},
		{"1500e-3", 0, wholeFraction},
		{"0.5e1", 5, wholeOK},
		{"0e-999", 0, wholeOK},
		{"0.0", 0, wholeOK},
		{"-10", -10, wholeOK},
		{"1.5", 0, wholeFraction},
		{"1e-1", 0, wholeFraction},
		{"1.0000000000000000000001", 0, wholeFraction},
		{"9223372036854775807", math.MaxInt64, wholeOK},
		{"9223372036854775808", math.MaxInt64, wholeOK},
		{"-9223372036854775808", math.MinInt64, wholeOK},
		{"-9223372036854775809", math.MinInt64, wholeOK},
		{"1e19", math.MaxInt64, wholeOK},
		{"1e18", 1e18, wholeOK},
		{"1e400", math.MaxInt64, wholeOK},
		{"-1e400", math.MinInt64, wholeOK},
		{"1e99999999999999999999999", math.MaxInt64, wholeOK},
		{"1" + strings.Repeat("0", 30) + "e-30", 1, wholeOK},
		{"", 0, wholeNotNum},
		{"-", 0, wholeNotNum},
		{"01", 0, wholeNotNum},
		{"+1", 0, wholeNotNum},
		{"1.", 0, wholeNotNum},
		{".5", 0, wholeNotNum},
		{"1e", 0, wholeNotNum},
		{"1e+", 0, wholeNotNum},
		{"0x10", 0, wholeNotNum},
		{"1 ", 0, wholeNotNum},
		{"\"1\"", 0, wholeNotNum},
		{"NaN", 0, wholeNotNum},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, res := parseWhole(tt.in)
			if got != tt.want || res != tt.wantRes {
				t.Errorf("parseWhole(%q) = %d, %d; want %d, %d", tt.in, got, res, tt.want, tt.wantRes)
			}
		})
	}
}

func TestParseWholeNumber(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		in     string
		want   int64
		wantOK bool
	}{
		{"whole", "1e3", 1000, true},
		{"saturated", "1e999999999", math.MaxInt64, true},
		{"fraction", "1.5", 0, false},
		{"underflowing fraction", "1e-999999999", 0, false},
		{"not a number", "true", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseWholeNumber(tt.in)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseWholeNumber(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
