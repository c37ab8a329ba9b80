package ratelimit

import (
	"context"
	"errors"
	"math"
)

// Every amount a budget counts (tokens, micro-dollars, requests) is an
// int64 that never wraps: sums and products saturate at the type's ends, so
// an absurd request is refused for its size instead of coming round
// negative and fitting.

// SatAdd is a + b, held at math.MaxInt64 or math.MinInt64 instead of
// wrapping.
func SatAdd(a, b int64) int64 {
	c := a + b
	if (c > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return c
}

// SatMul is a × b for a, b ≥ 0 (a negative operand counts as 0), held at
// math.MaxInt64 instead of wrapping.
func SatMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// Errors a UsageCounter (or SpendCounter) wraps so that the budgets can
// tell a store that is away from one that refused a statement.
var (
	// ErrStoreUnavailable means the store could not be reached (connection
	// refused or reset, a timeout): only this switches the budgets to
	// counting in memory for a while.
	ErrStoreUnavailable = errors.New("ratelimit: usage store unreachable")
	// ErrUnknownID means the connection or client key is not in the store
	// (deleted while a request of it was in flight).
	ErrUnknownID = errors.New("ratelimit: no such connection or client key in the usage store")
)

// storeAway reports whether err, from a usage or spend store, means the
// store is unreachable: wrapped ErrStoreUnavailable, or a call that ran out
// of its own time. A client's cancellation is not the store failing, and
// any other error (a constraint, a range) is about that one statement.
func storeAway(err error) bool {
	return errors.Is(err, ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded)
}
