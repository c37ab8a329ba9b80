package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// fakeStore is a Store whose answers a test sets; calls counts the calls.
type fakeStore struct {
	reserve func(id string, spacing, budget time.Duration) (time.Duration, bool, error)
	view    func(id string) (View, error)
	calls   int
}

func (f *fakeStore) ReserveTurn(_ context.Context, id string, spacing, budget time.Duration) (time.Duration, bool, error) {
	f.calls++
	return f.reserve(id, spacing, budget)
}

func (f *fakeStore) View(_ context.Context, id string, _ int64) (View, error) {
	f.calls++
	return f.view(id)
}

func (f *fakeStore) AddTokens(context.Context, string, int64, int64) error { return nil }
func (f *fakeStore) ReserveTokens(context.Context, string, int64, int64) (bool, int64, time.Duration, error) {
	return false, 0, 0, errors.New("not used")
}
func (f *fakeStore) CoolDown(context.Context, string, string, time.Duration) error   { return nil }
func (f *fakeStore) CoolConnection(context.Context, string, time.Duration) error     { return nil }
func (f *fakeStore) Suspend(context.Context, string, time.Duration) error            { return nil }
func (f *fakeStore) Reset(context.Context, string) error                             { return nil }
func (f *fakeStore) ShareCap(context.Context, string, string, int, int) (int, error) { return 0, nil }

// TestSharedView: the store's view says what is suspended or cooling and
// how full the tpm window is, on the gateway's clock; learned caps go to
// adopt; the view is cached, not read again per call.
func TestSharedView(t *testing.T) {
	t.Parallel()
	st := &fakeStore{view: func(string) (View, error) {
		return View{Cooling: map[string]time.Duration{"m1": time.Minute}, TPMUsed: 90, TPMWindowLeft: 30 * time.Second,
			Learned: map[string]int{"connection:c1": 3}}, nil
	}}
	var adopted map[string]int
	s := NewShared(st, func() time.Time { return t0 }, slog.New(&recordingHandler{}),
		func(_ string, learned map[string]int) { adopted = learned })
	var r State
	until, suspended := s.Unavailable(t.Context(), "c1", &r, 100, "m1", t0)
	if suspended || !until.Equal(t0.Add(time.Minute)) {
		t.Errorf("Unavailable(m1) = %v, %v; want cooling until %v", until, suspended, t0.Add(time.Minute))
	}
	if until, _ := s.Unavailable(t.Context(), "c1", &r, 100, "m2", t0); !until.IsZero() {
		t.Errorf("Unavailable(m2) = %v, want available", until)
	}
	if adopted["connection:c1"] != 3 {
		t.Errorf("adopted %v, want the learned cap 3", adopted)
	}
	l := &Limits{TPM: 100, GateTPM: "tpm:c1"}
	r.learn(20, true) // the estimate is 20 now
	b, blocked := s.Blocked(t.Context(), "c1", l, &r, t0)
	if !blocked || b.Code != CodeTPM || !b.Until.Equal(t0.Add(30*time.Second)) {
		t.Errorf("Blocked = %+v, %v; want TPM until the store's window ends (90 used + 20 estimated > 100)", b, blocked)
	}
	if st.calls != 1 {
		t.Errorf("%d store calls, want 1 (the view is cached)", st.calls)
	}
}

// TestSharedTurnFailsOpen: a turn comes from the store while it answers;
// when it fails, the in-process spacing decides, the failure is logged once
// and the store is left alone for a while.
func TestSharedTurnFailsOpen(t *testing.T) {
	t.Parallel()
	fail := false
	st := &fakeStore{reserve: func(_ string, _, budget time.Duration) (time.Duration, bool, error) {
		if fail {
			return 0, false, errors.New("refused")
		}
		return time.Hour, budget < 0 || budget >= time.Hour, nil
	}}
	logs := &recordingHandler{}
	s := NewShared(st, time.Now, slog.New(logs), func(string, map[string]int) {})
	var r State
	r.SetSpacing(time.Hour, time.Now())
	start := time.Now()
	got := s.Turn(t.Context(), "c1", &r, time.Hour, start, time.Second)
	if got.Verdict != TurnTooLate || !got.Shared || got.Wait != time.Hour {
		t.Fatalf("turn %+v, want the store's turn, too late", got)
	}
	if d := s.TurnDelay(&r, time.Now()); d < 59*time.Minute {
		t.Errorf("TurnDelay %v, want about the hour the store said", d)
	}
	fail = true
	got = s.Turn(t.Context(), "c1", &r, time.Hour, start, time.Second)
	if got.Verdict != TurnTaken || got.Shared {
		t.Fatalf("turn with the store failing: %+v, want the in-process turn (taken at once)", got)
	}
	calls := st.calls
	got = s.Turn(t.Context(), "c1", &r, time.Hour, start, time.Second)
	if got.Verdict != TurnTooLate || got.Shared || st.calls != calls {
		t.Errorf("turn right after a failure: %+v, store calls %d→%d; want in-process, store not asked", got, calls, st.calls)
	}
	if n := logs.count(); n != 1 {
		t.Errorf("%d warnings, want 1", n)
	}
}
