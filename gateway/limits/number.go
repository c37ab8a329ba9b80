package limits

import "math"

// wholeResult classifies a number literal for parseWhole.
type wholeResult int

const (
	wholeOK       wholeResult = iota // a whole number (saturated to the int64 range)
	wholeNotNum                      // not a JSON number literal at all
	wholeFraction                    // a number with a non-zero fractional part
)

// maxExponent bounds the decimal exponent we track; anything beyond it is
// saturated, which keeps "1e999999999" cheap to classify.
const maxExponent = 1 << 40

// parseWhole reports the value of the JSON number literal s when it has no
// fractional part. "1", "1.0", "1e3" and "10e-1" are whole; "1.5" and "1e-1"
// are not. Whole values outside the int64 range saturate to math.MinInt64 or
// math.MaxInt64, so range checks still reject them. It works on the decimal
// digits directly instead of going through float64, so no rounding can make a
// fraction look whole.
func parseWhole(s string) (int64, wholeResult) {
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	// Integer part: "0" or a non-zero digit followed by digits.
	intStart := i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return 0, wholeNotNum
	}
	intPart := s[intStart:i]
	fracPart := ""
	if i < len(s) && s[i] == '.' {
		i++
		fracStart := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == fracStart {
			return 0, wholeNotNum
		}
		fracPart = s[fracStart:i]
	}
	var exp int64
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		expNeg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		expStart := i
		for i < len(s) && isDigit(s[i]) {
			if exp < maxExponent {
				exp = exp*10 + int64(s[i]-'0')
			}
			i++
		}
		if i == expStart {
			return 0, wholeNotNum
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(s) {
		return 0, wholeNotNum
	}

	// The value is digits × 10^exp, with digits = intPart+fracPart.
	digits := intPart + fracPart
	exp -= int64(len(fracPart))
	// Drop leading zeros; an all-zero mantissa is zero whatever the exponent.
	start := 0
	for start < len(digits) && digits[start] == '0' {
		start++
	}
	digits = digits[start:]
	if digits == "" {
		return 0, wholeOK
	}
	// Move trailing zeros into the exponent.
	end := len(digits)
	for digits[end-1] == '0' {
		end--
	}
	exp += int64(len(digits) - end)
	digits = digits[:end]
	if exp < 0 {
		return 0, wholeFraction
	}
	saturated := int64(math.MaxInt64)
	if neg {
		saturated = math.MinInt64
	}
	// math.MaxInt64 has 19 digits; anything longer overflows.
	if int64(len(digits))+exp > 19 {
		return saturated, wholeOK
	}
	var u uint64
	for _, c := range []byte(digits) {
		u = u*10 + uint64(c-'0') // at most 19 digits: fits in uint64
	}
	for range exp {
		if u > math.MaxUint64/10 {
			return saturated, wholeOK
		}
		u *= 10
	}
	if neg {
		if u > 1<<63 {
			return saturated, wholeOK
		}
		return -int64(u), wholeOK // u == 1<<63 wraps to math.MinInt64, which is right
	}
	if u > math.MaxInt64 {
		return saturated, wholeOK
	}
	return int64(u), wholeOK
}

// ParseWholeNumber reports the value of the JSON number literal s (no
// surrounding space) when it has no fractional part, exactly as the strict
// decoders read numbers: "1", "1.0" and "1e3" are whole; "1.5", "1e-999999999"
// and anything that is not a JSON number are not. Whole values outside the
// int64 range saturate, so range checks still reject them.
func ParseWholeNumber(s string) (int64, bool) {
	n, res := parseWhole(s)
	return n, res == wholeOK
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
