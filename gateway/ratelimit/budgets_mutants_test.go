package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// TestTPMDebtPaidOffPerMinute: a request that used 2 500 tokens of a 1 000-token
// minute leaves a debt paid off at 1 000 a minute: 1 500 over the limit in the
// next minute, 500 in the one after, none in the third (1 000 remaining), and
// none after.
func TestTPMDebtPaidOffPerMinute(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	var r State
	l := &Limits{TPM: 1000, GateTPM: "tpm:c"}
	b := Budget{ID: "c", DayID: "c", L: l, R: &r}
	t0 := time.Date(2026, 3, 9, 12, 0, 30, 0, time.UTC)
	var rs Reservation
	if _, v := rs.Reserve(ctx, Local{}, d, b, 500, t0); v != DispatchOK {
		t.Fatalf("reserve: %v", v)
	}
	rs.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 2500}, t0)
	for i, want := range []int64{-1500, -500, 500, 1000, 1000} {
		now := t0.Add(time.Duration(i) * time.Minute)
		if got := r.Budgets(l, now)[live.BudgetTPM].Remaining; got != want {
			t.Errorf("minute %d: tpm remaining %d, want %d", i, got, want)
		}
	}
}

// TestTPMBlockedUntilDebtPaid: a full 1 000-token window keeps a request out
// until the minute's end, and a debt until the minute in which it is paid off
// far enough for the request (1 000 tokens a minute).
func TestTPMBlockedUntilDebtPaid(t *testing.T) {
	t.Parallel()
	l := &Limits{TPM: 1000, GateTPM: "tpm:c"}
	end := time.Date(2026, 3, 9, 12, 1, 0, 0, time.UTC)
	for _, tc := range []struct {
		used  int64
		until time.Time
	}{{1000, end}, {1999, end}, {2000, end.Add(time.Minute)}, {2500, end.Add(time.Minute)}, {3001, end.Add(2 * time.Minute)}} {
		blk, blocked := tpmBlocked(l, tc.used, 1, end)
		if !blocked || blk.Until != tc.until || blk.Code != CodeTPM {
			t.Errorf("used %d: blocked %v until %s (%s), want until %s", tc.used, blocked, blk.Until, blk.Code, tc.until)
		}
	}
	if _, blocked := tpmBlocked(l, 0, 5000, end); blocked {
		t.Error("an empty window blocked a request larger than the limit; one request always fits")
	}
	if _, blocked := tpmBlocked(l, 999, 1, end); blocked {
		t.Error("999 of 1000 used blocked a 1-token request")
	}
	if _, blocked := tpmBlocked(l, 1000, 0, end); !blocked {
		t.Error("a full window let in a request with no estimate yet")
	}
}

// TestBudgetsReportOnlyTheLimitsSet: the live view lists the budgets set, each
// with what remains; none when nothing is set.
func TestBudgetsReportOnlyTheLimitsSet(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 9, 12, 0, 30, 0, time.UTC)
	var r State
	if got := r.Budgets(&Limits{}, now); got != nil {
		t.Errorf("no limits: budgets %v, want none", got)
	}
	l := &Limits{TPD: 1000}
	got := r.Budgets(l, now)
	if _, ok := got[live.BudgetTPD]; !ok || len(got) != 1 {
		t.Errorf("tpd only: budgets %v, want tpd alone", got)
	}
	l = &Limits{RPM: 10}
	r.CountDispatch(l, now)
	got = r.Budgets(l, now)
	if b, ok := got[live.BudgetRPM]; !ok || len(got) != 1 || b.Remaining != 9 {
		t.Errorf("rpm only after one dispatch: budgets %v, want rpm with 9 remaining", got)
	}
	l = &Limits{RPD: 5}
	got = r.Budgets(l, now)
	if b, ok := got[live.BudgetRPD]; !ok || len(got) != 1 || b.Remaining != 5 {
		t.Errorf("rpd only: budgets %v, want rpd with 5 remaining", got)
	}
}

// TestSpendBudgetsReportOnlyTheBudgetsSet: a key's money budgets as its client
// sees them: each one set, with what remains (never below 0) and when it resets.
func TestSpendBudgetsReportOnlyTheBudgetsSet(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 9, 12, 0, 0, 0, time.UTC)
	sp := Spend{Day: 300, Month: 4_000}
	got := SpendBudgets(&Limits{BudgetDay: 1_000, BudgetMonth: 3_000}, sp, now)
	want := map[string]SpendBudget{
		limits.KeyBudgetUSDDaily:   {Limit: 1_000, Remaining: 700, ResetAt: time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)},
		limits.KeyBudgetUSDMonthly: {Limit: 3_000, Remaining: 0, ResetAt: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("both budgets (-want +got):\n%s", diff)
	}
	got = SpendBudgets(&Limits{BudgetMonth: 5_000}, sp, now)
	want = map[string]SpendBudget{limits.KeyBudgetUSDMonthly: {Limit: 5_000, Remaining: 1_000, ResetAt: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("month only (-want +got):\n%s", diff)
	}
	if got := SpendBudgets(&Limits{}, sp, now); len(got) != 0 {
		t.Errorf("no budgets: %v, want none", got)
	}
}

// TestForConnectionLimits: a connection's overrides become its limits; a
// negative or absent one is none; the spacing gate is named by whichever of rpm
// and minTime sets the longer spacing (rpm when equal).
func TestForConnectionLimits(t *testing.T) {
	t.Parallel()
	i := func(v int) *int { return &v }
	i64 := func(v int64) *int64 { return &v }
	l := ForConnection("c", limits.Overrides{RPD: i(50), TPM: i64(1000), TPD: i64(9000), RPM: i(60), MinTimeMs: i(1000)})
	if l.RPD != 50 || l.TPM != 1000 || l.TPD != 9000 || l.RPM != 60 {
		t.Errorf("limits %+v, want rpd 50, tpm 1000, tpd 9000, rpm 60", l)
	}
	if l.SpacingGate != "rpm:c" || l.Spacing != time.Second {
		t.Errorf("rpm 60 and minTime 1000 ms: spacing %s by %q, want 1s by rpm:c", l.Spacing, l.SpacingGate)
	}
	if l := ForConnection("c", limits.Overrides{RPM: i(60), MinTimeMs: i(1500)}); l.SpacingGate != "minTime:c" {
		t.Errorf("minTime longer than rpm's spacing: gate %q, want minTime:c", l.SpacingGate)
	}
	l = ForConnection("c", limits.Overrides{RPD: i(-1), TPM: i64(-1), TPD: i64(0)})
	if l.RPD != 0 || l.TPM != 0 || l.TPD != 0 || l.Budgeted() || l.CountsTokens() {
		t.Errorf("negative and zero overrides: %+v, want no limits", l)
	}
	if !(&Limits{TPD: 1}).CountsTokens() || !(&Limits{TPM: 1}).CountsTokens() || (&Limits{RPD: 1}).CountsTokens() {
		t.Error("CountsTokens: want true for tpm or tpd, false for rpd alone")
	}
	if !(&Limits{BudgetMonth: 1}).Spends() || (&Limits{}).Spends() {
		t.Error("Spends: want true for a month budget, false for none")
	}
}

// TestTPDInMemoryExactFillAndSettle: without a usage store, a reservation that
// exactly fills the day is accepted and one token more refused; settling for
// less than reserved gives the difference back the same day.
func TestTPDInMemoryExactFillAndSettle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	var r State
	l := &Limits{TPD: 1000, GateTPD: "tpd:c"}
	b := Budget{ID: "c", DayID: "c", L: l, R: &r}
	now := time.Date(2026, 3, 9, 12, 0, 0, 0, time.UTC)
	var a, c Reservation
	if _, v := a.Reserve(ctx, Local{}, d, b, 600, now); v != DispatchOK {
		t.Fatalf("600: %v", v)
	}
	if _, v := c.Reserve(ctx, Local{}, d, b, 400, now); v != DispatchOK {
		t.Fatalf("400 more, exactly the day: %v", v)
	}
	var x Reservation
	if blk, v := x.Reserve(ctx, Local{}, d, b, 1, now); v == DispatchOK || blk.Code != CodeTPD {
		t.Fatalf("1 more: %v (%+v), want refused with %s", v, blk, CodeTPD)
	}
	a.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 100}, now)
	if got := r.Budgets(l, now)[live.BudgetTPD].Remaining; got != 500 {
		t.Errorf("after settling 600 at 100: remaining %d, want 500", got)
	}
}

// flakyDays is a dayStore that fails while fail is set.
type flakyDays struct {
	dayStore
	fail bool
}

func (s *flakyDays) AddUsage(ctx context.Context, id string, day time.Time, r, n int64) (DayUsage, error) {
	if s.fail {
		return DayUsage{}, fmt.Errorf("store away: %w", ErrStoreUnavailable)
	}
	return s.dayStore.AddUsage(ctx, id, day, r, n)
}

func (s *flakyDays) ReserveTokens(ctx context.Context, id string, day time.Time, n, limit int64) (int64, bool, error) {
	if s.fail {
		return 0, false, fmt.Errorf("store away: %w", ErrStoreUnavailable)
	}
	return s.dayStore.ReserveTokens(ctx, id, day, n, limit)
}

// TestTokensCountedWhileStoreAwayWrittenWhenBack: tpd tokens reserved in memory
// while the usage store is away are written to it with the next call once it is
// back, and memory keeps both.
func TestTokensCountedWhileStoreAwayWrittenWhenBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	u := &flakyDays{dayStore: dayStore{tokens: map[string]int64{}}, fail: true}
	var r State
	l := &Limits{TPD: 1000, GateTPD: "tpd:c"}
	b := Budget{ID: "c", DayID: "c", L: l, R: &r, U: u}
	now := time.Date(2026, 3, 9, 12, 0, 0, 0, time.UTC)
	var a Reservation
	if _, v := a.Reserve(ctx, Local{}, d, b, 200, now); v != DispatchOK {
		t.Fatalf("reserve while away: %v", v)
	}
	u.fail = false
	d.Retry()
	var c Reservation
	if _, v := c.Reserve(ctx, Local{}, d, b, 100, now); v != DispatchOK {
		t.Fatalf("reserve once back: %v", v)
	}
	if got := u.get("c", now); got != 300 {
		t.Errorf("store's day tokens %d, want 300 (200 from memory, 100 reserved)", got)
	}
	if got := r.Budgets(l, now)[live.BudgetTPD].Remaining; got != 700 {
		t.Errorf("tpd remaining %d, want 700", got)
	}
}

// TestSpendCountedWhileStoreAwayWrittenWhenBack: the money side of the same.
func TestSpendCountedWhileStoreAwayWrittenWhenBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	u := newSpendStore()
	u.fail = true
	var r State
	b := Budget{ID: "key:k", DayID: "k", L: &Limits{BudgetDay: 1_000_000, GateBudget: "key-budget:k"}, R: &r, U: u}
	now := time.Date(2026, 3, 9, 12, 0, 0, 0, time.UTC)
	var a Reservation
	if _, v := a.ReserveSpend(ctx, Local{}, d, b, 200_000, now); v != DispatchOK {
		t.Fatalf("reserve while away: %v", v)
	}
	u.mu.Lock()
	u.fail = false
	u.mu.Unlock()
	d.Retry()
	var c Reservation
	if _, v := c.ReserveSpend(ctx, Local{}, d, b, 100_000, now); v != DispatchOK {
		t.Fatalf("reserve once back: %v", v)
	}
	if sp, _ := u.Spend(ctx, "k", now); sp != (Spend{Day: 300_000, Month: 300_000}) {
		t.Errorf("store's spend %+v, want 300000 both (200000 from memory, 100000 reserved)", sp)
	}
	if got := r.SpendNow(now); got != (Spend{Day: 300_000, Month: 300_000}) {
		t.Errorf("memory's spend %+v, want 300000 both", got)
	}
	if !d.down.up() {
		t.Error("the store is left alone after it took the pending spend")
	}
}
