package ratelimit

import (
	"log/slog"
	"testing"
	"time"
)

// TestSharedViewSuspendedAndConnectionCooling: the store's view of a suspended
// connection makes every model unavailable as a suspension until it ends; a
// cooling connection makes its models unavailable (not suspended) until the
// cooling ends; a view with neither leaves them available.
func TestSharedViewSuspendedAndConnectionCooling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		view      View
		until     time.Time
		suspended bool
	}{
		{"suspended", View{Suspended: 10 * time.Second}, t0.Add(10 * time.Second), true},
		{"connection cooling", View{ConnCooling: 20 * time.Second}, t0.Add(20 * time.Second), false},
		{"connection cooling past the model's", View{ConnCooling: 20 * time.Second,
			Cooling: map[string]time.Duration{"m1": 5 * time.Second}}, t0.Add(20 * time.Second), false},
		{"neither", View{}, time.Time{}, false},
	} {
		st := &fakeStore{view: func(string) (View, error) { return tc.view, nil }}
		s := NewShared(st, func() time.Time { return t0 }, slog.New(&recordingHandler{}), func(string, map[string]int) {})
		var r State
		until, suspended := s.Unavailable(t.Context(), "c1", &r, 100, "m1", t0)
		if !until.Equal(tc.until) || suspended != tc.suspended {
			t.Errorf("%s: Unavailable = %v, %v; want %v, %v", tc.name, until, suspended, tc.until, tc.suspended)
		}
	}
}
