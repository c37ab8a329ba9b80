package ratelimit

import (
	"log/slog"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// The clock of these tests is the now each call is given: a reservation made
// one second before UTC midnight, settled two seconds later.
var (
	beforeMidnight = time.Date(2026, 3, 9, 23, 59, 59, 0, time.UTC)
	afterMidnight  = beforeMidnight.Add(2 * time.Second)
)

// TestSettleBeforeMidnightLeavesNewDayTokens: yesterday's 300-token
// reservation settling at 40 corrects yesterday only; the new day's 500 used
// tokens of 1 000 stay 500, so 500 remain (not 760). With a usage store and
// from memory alone.
func TestSettleBeforeMidnightLeavesNewDayTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		store func() UsageCounter
	}{
		{"memory", func() UsageCounter { return nil }},
		{"store", func() UsageCounter { return &dayStore{tokens: map[string]int64{}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			d := NewDays(slog.New(slog.DiscardHandler))
			var r State
			b := Budget{ID: "c", DayID: "c", L: &Limits{TPD: 1000, GateTPD: "tpd:c"}, R: &r, U: tc.store()}
			var old Reservation
			if _, v := old.Reserve(ctx, Local{}, d, b, 300, beforeMidnight); v != DispatchOK {
				t.Fatalf("reserve before midnight: %v", v)
			}
			var today Reservation
			if _, v := today.Reserve(ctx, Local{}, d, b, 500, afterMidnight); v != DispatchOK {
				t.Fatalf("reserve after midnight: %v", v)
			}
			today.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 500}, afterMidnight)
			old.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 40}, afterMidnight)

			got := r.Budgets(b.L, afterMidnight)[live.BudgetTPD]
			if got.Remaining != 500 {
				t.Errorf("tpd remaining after yesterday's reservation settled = %d, want 500 (1000 - today's 500)", got.Remaining)
			}
			if r.Reserved() != 0 {
				t.Errorf("reserved = %d, want 0", r.Reserved())
			}
		})
	}
}

// TestSettleBeforeMidnightLeavesNewDaySpend: the money side of the same: a
// $0.30 reservation made before midnight settling at $0.04 leaves the new
// day's $0.50 spent as it is ($0.50 of $1 remaining), while the month, the
// same on both days, is corrected ($0.54). With a spend store and from memory
// alone.
func TestSettleBeforeMidnightLeavesNewDaySpend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		store func() UsageCounter
	}{
		{"memory", func() UsageCounter { return nil }},
		{"store", func() UsageCounter { return newSpendStore() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			d := NewDays(slog.New(slog.DiscardHandler))
			var r State
			l := &Limits{BudgetDay: 1_000_000, BudgetMonth: 10_000_000, GateBudget: "key-budget:k"}
			b := Budget{ID: "key:k", DayID: "k", L: l, R: &r, U: tc.store()}
			var old Reservation
			if _, v := old.ReserveSpend(ctx, Local{}, d, b, 300_000, beforeMidnight); v != DispatchOK {
				t.Fatalf("reserve before midnight: %v", v)
			}
			var today Reservation
			if _, v := today.ReserveSpend(ctx, Local{}, d, b, 500_000, afterMidnight); v != DispatchOK {
				t.Fatalf("reserve after midnight: %v", v)
			}
			today.Settle(ctx, Local{}, d, Usage{Known: true, Cost: 500_000}, afterMidnight)
			old.Settle(ctx, Local{}, d, Usage{Known: true, Cost: 40_000}, afterMidnight)

			if got, want := r.SpendNow(afterMidnight), (Spend{Day: 500_000, Month: 540_000}); got != want {
				t.Errorf("spend after yesterday's reservation settled = %+v, want %+v", got, want)
			}
			day := SpendBudgets(l, r.SpendNow(afterMidnight), afterMidnight)["budgetUsdDaily"]
			if day.Remaining != 500_000 {
				t.Errorf("daily budget remaining = %d µ$, want 500000", day.Remaining)
			}
			if r.Reserved() != 0 {
				t.Errorf("reserved = %d, want 0", r.Reserved())
			}
		})
	}
}
