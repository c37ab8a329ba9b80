package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// recordingHandler counts the log records it receives.
type recordingHandler struct {
	mu sync.Mutex
	n  int
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(context.Context, slog.Record) error {
	h.mu.Lock()
	h.n++
	h.mu.Unlock()
	return nil
}

func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestTPMDebtBlocksUntilPaidOff: an answer far over the estimate leaves the
// window in debt, paid off at tpm tokens a minute; the block says when.
func TestTPMDebtBlocksUntilPaidOff(t *testing.T) {
	t.Parallel()
	l := &Limits{TPM: 100, GateTPM: "tpm:c1"}
	var r State
	if _, blocked := r.Blocked(l, t0); blocked {
		t.Fatal("an empty window blocks")
	}
	var rs Reservation
	d := NewDays(slog.New(&recordingHandler{}))
	if _, v := rs.Reserve(t.Context(), Local{}, d, Budget{ID: "c1", L: l, R: &r}, 10, t0); v != DispatchOK {
		t.Fatalf("reserving 10 in an empty window: %v", v)
	}
	rs.Settle(t.Context(), Local{}, d, Usage{Known: true, Tokens: 250}, t0)
	b, blocked := r.Blocked(l, t0)
	minute := t0.Truncate(time.Minute)
	want := Block{Code: CodeTPM, Gate: "tpm:c1", Until: minute.Add(3 * time.Minute)}
	if !blocked || b != want {
		t.Fatalf("Blocked = %+v, %v; want %+v (250 used, estimate 250, 100 a minute)", b, blocked, want)
	}
	if _, blocked := r.Blocked(l, want.Until); blocked {
		t.Errorf("still blocked at %v, when the debt is paid off", want.Until)
	}
}

// TestDayBudgetInMemory: without a usage store rpd is counted in memory
// and starts afresh on the next UTC day.
func TestDayBudgetInMemory(t *testing.T) {
	t.Parallel()
	d := NewDays(slog.New(&recordingHandler{}))
	l := &Limits{RPD: 2, GateRPD: "rpd:c1"}
	var r State
	ctx := t.Context()
	for i, want := range []Dispatch{DispatchOK, DispatchOK, DispatchSkipped} {
		if got, _ := d.CountRequest(ctx, nil, "c1", &r, l, t0); got != want {
			t.Fatalf("request %d: %v, want %v", i, got, want)
		}
	}
	b, blocked := r.Blocked(l, t0)
	if !blocked || b.Code != CodeRPD || !b.Until.Equal(time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("Blocked = %+v, %v; want RPD until the next UTC midnight", b, blocked)
	}
	if got, _ := d.CountRequest(ctx, nil, "c1", &r, l, t0.Add(24*time.Hour)); got != DispatchOK {
		t.Errorf("next day: %v, want DispatchOK", got)
	}
}

// fakeUsage is a UsageCounter whose answers a test sets.
type fakeUsage struct {
	mu       sync.Mutex
	err      error
	requests map[string]int64
	tokens   map[string]int64
}

func (f *fakeUsage) CountRequest(_ context.Context, id string, _ time.Time, limit int64) (int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, false, f.err
	}
	if f.requests[id] >= limit {
		return f.requests[id], false, nil
	}
	f.requests[id]++
	return f.requests[id], true, nil
}

func (f *fakeUsage) AddUsage(_ context.Context, id string, _ time.Time, requests, tokens int64) (DayUsage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return DayUsage{}, f.err
	}
	f.requests[id] += requests
	f.tokens[id] += tokens
	return DayUsage{Requests: f.requests[id], Tokens: f.tokens[id]}, nil
}

func (f *fakeUsage) ReserveTokens(_ context.Context, id string, _ time.Time, tokens, limit int64) (int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, false, f.err
	}
	if f.tokens[id]+tokens > limit {
		return f.tokens[id], false, nil
	}
	f.tokens[id] += tokens
	return f.tokens[id], true, nil
}

func (f *fakeUsage) DayUsage(context.Context, time.Time) (map[string]DayUsage, error) {
	return nil, errors.New("not used")
}

// TestDaysFailOpen: while the usage store fails, requests and tokens are
// counted in memory (and one warning logged); once it answers again, what
// was counted meanwhile is written with the next call.
func TestDaysFailOpen(t *testing.T) {
	t.Parallel()
	logs := &recordingHandler{}
	d := NewDays(slog.New(logs))
	u := &fakeUsage{err: fmt.Errorf("refused: %w", ErrStoreUnavailable), requests: map[string]int64{}, tokens: map[string]int64{}}
	l := &Limits{RPD: 10, TPD: 1000}
	var r State
	ctx := t.Context()
	if got, _ := d.CountRequest(ctx, u, "c1", &r, l, t0); got != DispatchOK {
		t.Fatalf("store down: %v, want DispatchOK (fail-open)", got)
	}
	var rs Reservation
	if _, v := rs.Reserve(ctx, Local{}, d, Budget{ID: "c1", DayID: "c1", L: l, R: &r, U: u}, 100, t0); v != DispatchOK {
		t.Fatalf("store down: reservation %v, want DispatchOK (fail-open)", v)
	}
	rs.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 40}, t0)
	if got := logs.count(); got != 1 {
		t.Errorf("%d warnings, want 1", got)
	}
	u.mu.Lock()
	u.err = nil
	u.mu.Unlock()
	d.Retry() // the retry period is over
	if got, _ := d.CountRequest(ctx, u, "c1", &r, l, t0); got != DispatchOK {
		t.Fatalf("store back: %v, want DispatchOK", got)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.requests["c1"] != 2 || u.tokens["c1"] != 40 {
		t.Errorf("store has %d requests, %d tokens; want 2 and 40 (the memory's written back)", u.requests["c1"], u.tokens["c1"])
	}
}

// TestTurn: the first turn comes at once, the next one is a spacing away
// (too late for a short wait bound, given back), and a client that has
// gone does not wait.
func TestTurn(t *testing.T) {
	t.Parallel()
	var r State
	r.SetSpacing(time.Hour, time.Now())
	start := time.Now()
	if got := r.Turn(t.Context(), start, time.Second); got.Verdict != TurnTaken || got.Waited != 0 {
		t.Fatalf("first turn %+v, want taken at once", got)
	}
	got := r.Turn(t.Context(), start, time.Second)
	if got.Verdict != TurnTooLate || got.Wait < 59*time.Minute {
		t.Fatalf("second turn %+v, want too late, an hour away", got)
	}
	if d := r.TurnDelay(time.Now()); d < 59*time.Minute {
		t.Errorf("TurnDelay %v after a given-back turn, want about an hour (the first turn's)", d)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got := r.Turn(ctx, start, 0); got.Verdict != TurnGone {
		t.Errorf("turn of a client gone: %+v, want TurnGone", got)
	}
}

func TestBudgets(t *testing.T) {
	t.Parallel()
	l := &Limits{RPM: 10, RPD: 5, TPD: 100}
	var r State
	r.CountDispatch(l, t0)
	next, midnight := t0.Truncate(time.Minute).Add(time.Minute), time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
	want := map[string]live.Budget{
		live.BudgetRPM: {Limit: 10, Remaining: 9, ResetAt: next},
		live.BudgetRPD: {Limit: 5, Remaining: 5, ResetAt: midnight},
		live.BudgetTPD: {Limit: 100, Remaining: 100, ResetAt: midnight},
	}
	if diff := cmp.Diff(want, r.Budgets(l, t0)); diff != "" {
		t.Errorf("budgets mismatch (-want +got):\n%s", diff)
	}
	if got := (&State{}).Budgets(&Limits{}, t0); got != nil {
		t.Errorf("budgets without limits = %v, want nil", got)
	}
}

// TestForConnection: the stricter of rpm and minTime sets the spacing and
// names its gate; negative values count as unset.
func TestForConnection(t *testing.T) {
	t.Parallel()
	p := func(n int) *int { return &n }
	tests := []struct {
		name string
		o    limits.Overrides
		want Limits
	}{
		{name: "rpm stricter", o: limits.Overrides{RPM: p(30), MinTimeMs: p(100)},
			want: Limits{Spacing: 2 * time.Second, SpacingGate: "rpm:c1", RPM: 30}},
		{name: "minTime stricter", o: limits.Overrides{RPM: p(600), MinTimeMs: p(500)},
			want: Limits{Spacing: 500 * time.Millisecond, SpacingGate: "minTime:c1", RPM: 600}},
		{name: "negative unset", o: limits.Overrides{RPD: p(-1)}, want: Limits{SpacingGate: "minTime:c1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.GateRPD, tc.want.GateTPM, tc.want.GateTPD = "rpd:c1", "tpm:c1", "tpd:c1"
			if diff := cmp.Diff(tc.want, ForConnection("c1", tc.o)); diff != "" {
				t.Errorf("limits mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
