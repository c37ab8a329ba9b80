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

// TestSharedTurnBudget: the store is asked for a turn within what is left of
// the request's wait bound, or without a bound (-1) when it has none (0); the
// next free turn it reports is what TurnDelay says is left.
func TestSharedTurnBudget(t *testing.T) {
	t.Parallel()
	var budgets []time.Duration
	st := &fakeStore{reserve: func(_ string, _, budget time.Duration) (time.Duration, bool, error) {
		budgets = append(budgets, budget)
		return 10 * time.Minute, false, nil
	}}
	s := NewShared(st, time.Now, slog.New(&recordingHandler{}), func(string, map[string]int) {})
	var r State
	r.SetSpacing(time.Hour, time.Now())
	start := time.Now()
	if got := s.Turn(t.Context(), "c1", &r, time.Hour, start, 0); got.Verdict != TurnTooLate || got.Wait != 10*time.Minute {
		t.Fatalf("turn %+v, want too late by the store's 10 minutes", got)
	}
	s.Turn(t.Context(), "c1", &r, time.Hour, start, time.Hour)
	if len(budgets) != 2 || budgets[0] != -1 || budgets[1] <= 59*time.Minute || budgets[1] > time.Hour {
		t.Errorf("budgets asked %v, want -1 (no bound) then just under an hour", budgets)
	}
	if d := s.TurnDelay(&r, time.Now()); d <= 9*time.Minute || d > 10*time.Minute {
		t.Errorf("TurnDelay %v, want just under the 10 minutes the store said", d)
	}
}

// TestLearnIgnoresZeroUsage: a known usage of 0 tokens (an empty answer) does
// not move the estimate of tokens per request; a real one does.
func TestLearnIgnoresZeroUsage(t *testing.T) {
	t.Parallel()
	var r State
	r.learn(100, true)
	r.learn(0, true)
	r.learn(500, false)
	if r.est != 100 {
		t.Errorf("estimate %d after 100 known, 0 known and 500 unknown; want 100", r.est)
	}
	r.learn(200, true)
	if r.est != (3*100+200+3)/4 {
		t.Errorf("estimate %d after 200 more, want %d", r.est, (3*100+200+3)/4)
	}
}

// TestTPMBlockedAtMostADay: a debt larger than a day of tpm blocks for a day at
// most.
func TestTPMBlockedAtMostADay(t *testing.T) {
	t.Parallel()
	l := &Limits{TPM: 1000, GateTPM: "tpm:c"}
	end := time.Date(2026, 3, 9, 12, 1, 0, 0, time.UTC)
	blk, blocked := tpmBlocked(l, 5_000_000, 1, end)
	if !blocked || blk.Until != end.Add(24*60*time.Minute-time.Minute) {
		t.Errorf("blocked %v until %s, want until %s", blocked, blk.Until, end.Add(24*60*time.Minute-time.Minute))
	}
}

// TestSharedViewReadAgainWhenStale: the cached view is read from the store again
// once it is older than sharedCacheFor.
func TestSharedViewReadAgainWhenStale(t *testing.T) {
	t.Parallel()
	st := &fakeStore{view: func(string) (View, error) { return View{}, nil }}
	s := NewShared(st, func() time.Time { return t0 }, slog.New(&recordingHandler{}), func(string, map[string]int) {})
	var r State
	s.Unavailable(t.Context(), "c1", &r, 100, "m1", t0)
	s.Unavailable(t.Context(), "c1", &r, 100, "m1", t0)
	if st.calls != 1 {
		t.Fatalf("%d store calls for two fresh reads, want 1", st.calls)
	}
	r.shared.mu.Lock()
	r.shared.fetchedAt = time.Now().Add(-sharedCacheFor - time.Second)
	r.shared.mu.Unlock()
	s.Unavailable(t.Context(), "c1", &r, 100, "m1", t0)
	if st.calls != 2 {
		t.Errorf("%d store calls after the cache went stale, want 2", st.calls)
	}
}

// TestSetSpacingChangeTakesEffect: a changed spacing moves the next turn at
// once: a turn taken with 1 s spacing, then a minute's spacing installed, puts
// the next free turn about a minute away, not a second.
func TestSetSpacingChangeTakesEffect(t *testing.T) {
	t.Parallel()
	var r State
	r.SetSpacing(time.Second, time.Now())
	if got := r.Turn(t.Context(), time.Now(), 0); got.Verdict != TurnTaken {
		t.Fatalf("first turn %+v, want taken", got)
	}
	if d := r.TurnDelay(time.Now()); d > time.Second {
		t.Fatalf("delay with 1 s spacing %v, want at most 1 s", d)
	}
	r.SetSpacing(time.Minute, time.Now())
	// The turn was taken before now, so the next one is at most a minute away:
	// the schedule moves by the change of spacing (59 s), not by more.
	if d := r.TurnDelay(time.Now()); d < 30*time.Second || d > time.Minute {
		t.Errorf("delay after a minute's spacing was installed %v, want about a minute and at most one", d)
	}
}
