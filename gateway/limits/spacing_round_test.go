package limits

import (
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
