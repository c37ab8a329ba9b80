package store

import "math"

// Counts and sums in the usage, spend and reservation tables never wrap or
// overflow: an addition is made in numeric and held within [0, the bigint
// maximum], so an absurd amount is kept at the ceiling instead of failing
// the statement (which the gateway would take for a refused request) or
// coming round negative.

// satSum is SQL for a + b (bigint expressions) held within [0, 2⁶³−1].
func satSum(a, b string) string {
	return "LEAST(GREATEST(" + a + "::numeric + " + b + ", 0), 9223372036854775807)::bigint"
}

// satAdd is a + b held within the int64 range.
func satAdd(a, b int64) int64 {
	c := a + b
	if (c > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return c
}
