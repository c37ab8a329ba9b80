package ratelimit

import (
	"math"
	"math/big"
	"testing"
)

// FuzzSatAdd: SatAdd and SatMul agree with exact arithmetic clamped to the
// int64 range.
func FuzzSatAdd(f *testing.F) {
	f.Add(int64(math.MaxInt64), int64(1))
	f.Add(int64(math.MinInt64), int64(-1))
	f.Add(int64(1<<40), int64(1<<40))
	f.Add(int64(-5), int64(7))
	f.Add(int64(5), int64(0))               // adding or multiplying by nothing
	f.Add(int64(math.MaxInt64/2), int64(2)) // a product just below the end, not clamped
	clamp := func(x *big.Int) int64 {
		if x.Cmp(big.NewInt(math.MaxInt64)) > 0 {
			return math.MaxInt64
		}
		if x.Cmp(big.NewInt(math.MinInt64)) < 0 {
			return math.MinInt64
		}
		return x.Int64()
	}
	f.Fuzz(func(t *testing.T, a, b int64) {
		if got, want := SatAdd(a, b), clamp(new(big.Int).Add(big.NewInt(a), big.NewInt(b))); got != want {
			t.Fatalf("SatAdd(%d, %d) = %d, want %d", a, b, got, want)
		}
		want := int64(0)
		if a > 0 && b > 0 {
			want = clamp(new(big.Int).Mul(big.NewInt(a), big.NewInt(b)))
		}
		if got := SatMul(a, b); got != want {
			t.Fatalf("SatMul(%d, %d) = %d, want %d", a, b, got, want)
		}
	})
}
