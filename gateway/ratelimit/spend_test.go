package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// spendStore is a UsageCounter and SpendCounter in memory, exact as the
// store's key_spend_reserved (one lock per call: both periods or neither).
type spendStore struct {
	dayStore
	mu    sync.Mutex
	spend map[string]int64 // id + " d " + day, id + " m " + month
	fail  bool
}

func newSpendStore() *spendStore {
	return &spendStore{dayStore: dayStore{tokens: map[string]int64{}}, spend: map[string]int64{}}
}

func (s *spendStore) keys(id string, at time.Time) (string, string) {
	return id + " d " + utcDay(at).Format(time.DateOnly), id + " m " + utcMonth(at).Format(time.DateOnly)
}

func (s *spendStore) ReserveSpend(_ context.Context, id string, at time.Time, micros, dayLimit, monthLimit int64) (Spend, SpendPeriod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return Spend{}, 0, fmt.Errorf("store away: %w", ErrStoreUnavailable)
	}
	d, m := s.keys(id, at)
	sp := Spend{Day: s.spend[d], Month: s.spend[m]}
	if dayLimit > 0 && sp.Day+micros > dayLimit {
		return sp, SpendDay, nil
	}
	if monthLimit > 0 && sp.Month+micros > monthLimit {
		return sp, SpendMonth, nil
	}
	s.spend[d] += micros
	s.spend[m] += micros
	return Spend{Day: s.spend[d], Month: s.spend[m]}, SpendFits, nil
}

func (s *spendStore) AddSpend(_ context.Context, id string, at time.Time, micros int64) (Spend, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return Spend{}, fmt.Errorf("store away: %w", ErrStoreUnavailable)
	}
	d, m := s.keys(id, at)
	s.spend[d] = max(s.spend[d]+micros, 0)
	s.spend[m] = max(s.spend[m]+micros, 0)
	return Spend{Day: s.spend[d], Month: s.spend[m]}, nil
}

func (s *spendStore) Spend(_ context.Context, id string, at time.Time) (Spend, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, m := s.keys(id, at)
	return Spend{Day: s.spend[d], Month: s.spend[m]}, nil
}

// TestSpendReservationAllOrNothing: with a day budget of $0.01 two
// reservations of $0.004 fit and the third is BUDGET_EXCEEDED at
// key-budget:k until the UTC day's end, giving back the tpd tokens it held
// with it; a model without a price (cost 0) is never refused.
func TestSpendReservationAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	for _, u := range []*spendStore{newSpendStore(), nil} {
		var r State
		l := &Limits{TPD: 100_000, GateTPD: "key-tpd:k", BudgetDay: 10_000, GateBudget: "key-budget:k"}
		b := Budget{ID: "key:k", DayID: "k", L: l, R: &r}
		if u != nil {
			b.U = u
		}
		var held [2]Reservation
		for i := range held {
			if _, v := held[i].Reserve(ctx, Local{}, d, b, 100, t0); v != DispatchOK {
				t.Fatalf("store %v: tokens %d: %v", u != nil, i, v)
			}
			if _, v := held[i].ReserveSpend(ctx, Local{}, d, b, 4_000, t0); v != DispatchOK {
				t.Fatalf("store %v: spend %d: %v", u != nil, i, v)
			}
		}
		var third Reservation
		if _, v := third.Reserve(ctx, Local{}, d, b, 100, t0); v != DispatchOK {
			t.Fatalf("third tokens: %v", v)
		}
		blk, v := third.ReserveSpend(ctx, Local{}, d, b, 4_000, t0)
		if v != DispatchSkipped || blk.Code != CodeBudget || blk.Gate != "key-budget:k" || !blk.Until.Equal(utcDay(t0).AddDate(0, 0, 1)) {
			t.Fatalf("store %v: third = %+v %v; want BUDGET_EXCEEDED until midnight", u != nil, blk, v)
		}
		if third.Held() || r.Reserved() != 2*(100+4_000) {
			t.Errorf("store %v: refused reservation holds %v; reserved %d", u != nil, third.Held(), r.Reserved())
		}
		if _, v := third.ReserveSpend(ctx, Local{}, d, b, 0, t0); v != DispatchOK || third.Held() {
			t.Errorf("store %v: a cost of 0 refused or held", u != nil)
		}
		if u != nil {
			if got := u.get("k", t0); got != 200 {
				t.Errorf("day tokens %d, want 200 (the third's given back)", got)
			}
			if sp, _ := u.Spend(ctx, "k", t0); sp != (Spend{Day: 8_000, Month: 8_000}) {
				t.Errorf("store spend %+v, want 8000", sp)
			}
		}
		for i := range held {
			held[i].Settle(ctx, Local{}, d, Released, t0)
		}
		if r.Reserved() != 0 || r.SpendNow(t0) != (Spend{}) {
			t.Errorf("store %v: after release: reserved %d, spend %+v", u != nil, r.Reserved(), r.SpendNow(t0))
		}
	}
}

// TestSpendSettles: a known cost replaces the reservation, an unknown one
// keeps it charged, Released gives it back — once, in the day it was taken.
func TestSpendSettles(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	u := newSpendStore()
	var r State
	b := Budget{ID: "key:k", DayID: "k", L: &Limits{BudgetDay: 1_000_000, GateBudget: "key-budget:k"}, R: &r, U: u}
	late := time.Date(2026, 1, 31, 23, 59, 59, 0, time.UTC)
	for _, tc := range []struct {
		u    Usage
		want int64
	}{{Usage{}, 4_000}, {Released, 4_000}, {Usage{Known: true, Tokens: 9, Cost: 1_500}, 5_500}} {
		var rs Reservation
		if _, v := rs.ReserveSpend(ctx, Local{}, d, b, 4_000, late); v != DispatchOK {
			t.Fatalf("reserve: %v", v)
		}
		rs.Settle(ctx, Local{}, d, tc.u, late)
		rs.Settle(ctx, Local{}, d, Released, late) // a second settlement does nothing
		if sp, _ := u.Spend(ctx, "k", late); sp.Day != tc.want || r.SpendNow(late).Day != tc.want {
			t.Errorf("after %+v: store %+v, memory %+v; want %d", tc.u, sp, r.SpendNow(late), tc.want)
		}
	}
	// Taken before midnight on the month's last day, settled after it:
	// the old day and month are corrected, the new ones untouched.
	var rs Reservation
	if _, v := rs.ReserveSpend(ctx, Local{}, d, b, 4_000, late); v != DispatchOK {
		t.Fatalf("reserve: %v", v)
	}
	next := late.Add(2 * time.Second)
	rs.Settle(ctx, Local{}, d, Usage{Known: true, Cost: 500}, next)
	if old, _ := u.Spend(ctx, "k", late); old != (Spend{Day: 6_000, Month: 6_000}) {
		t.Errorf("old day and month %+v, want 6000", old)
	}
	if sp, _ := u.Spend(ctx, "k", next); sp != (Spend{}) || r.SpendNow(next) != (Spend{}) {
		t.Errorf("new day and month: store %+v, memory %+v; want none", sp, r.SpendNow(next))
	}
	if r.Reserved() != 0 {
		t.Errorf("reserved = %d, want 0", r.Reserved())
	}
}

// TestSpendMonthlyBudget: a month of $0.01 and no day budget: $0.004 a day
// fits on two days, the third day is BUDGET_EXCEEDED until the first of
// the next month, which starts afresh. With the store and from memory
// alone, and with the store failing (memory enforces what it knows).
func TestSpendMonthlyBudget(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, mode := range []string{"store", "memory", "store fails"} {
		d := NewDays(slog.New(slog.DiscardHandler))
		var r State
		b := Budget{ID: "key:k", DayID: "k", L: &Limits{BudgetMonth: 10_000, GateBudget: "key-budget:k"}, R: &r}
		u := newSpendStore()
		if mode != "memory" {
			b.U = u
		}
		day := time.Date(2026, 2, 26, 10, 0, 0, 0, time.UTC)
		for i := range 2 {
			if mode == "store fails" && i == 1 {
				u.mu.Lock()
				u.fail = true
				u.mu.Unlock()
			}
			var rs Reservation
			if _, v := rs.ReserveSpend(ctx, Local{}, d, b, 4_000, day.AddDate(0, 0, i)); v != DispatchOK {
				t.Fatalf("%s: day %d: %v", mode, i, v)
			}
			rs.Settle(ctx, Local{}, d, Usage{}, day.AddDate(0, 0, i))
		}
		third := day.AddDate(0, 0, 2)
		var rs Reservation
		blk, v := rs.ReserveSpend(ctx, Local{}, d, b, 4_000, third)
		if v != DispatchSkipped || blk.Code != CodeBudget || !blk.Until.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("%s: third day = %+v %v; want BUDGET_EXCEEDED until March 1st", mode, blk, v)
		}
		if _, v := rs.ReserveSpend(ctx, Local{}, d, b, 4_000, time.Date(2026, 3, 1, 0, 0, 1, 0, time.UTC)); v != DispatchOK {
			t.Errorf("%s: next month refused: %v", mode, v)
		}
	}
}

// TestSpendBlocked: SpendBlocked previews what TakeSpend would answer at the
// spend this process knows, reserving nothing: $0.004 fits a day budget of
// $0.01 at $0.006 spent, $0.005 does not (BUDGET_EXCEEDED, budgetUsdDaily,
// until midnight); the month's budget names budgetUsdMonthly and the month's end.
func TestSpendBlocked(t *testing.T) {
	t.Parallel()
	d := NewDays(slog.New(slog.DiscardHandler))
	var r State
	l := &Limits{BudgetDay: 10_000, BudgetMonth: 12_000, GateBudget: "key-budget:k"}
	b := Budget{ID: "key:k", DayID: "k", L: l, R: &r}
	var rs Reservation
	if _, v := rs.ReserveSpend(t.Context(), Local{}, d, b, 6_000, t0); v != DispatchOK {
		t.Fatalf("reserve: %v", v)
	}
	if blk, blocked := r.SpendBlocked(l, 4_000, t0); blocked {
		t.Errorf("$0.004 at $0.006 of $0.01: blocked %+v", blk)
	}
	blk, blocked := r.SpendBlocked(l, 5_000, t0)
	if !blocked || blk.Code != CodeBudget || blk.Limit != "budgetUsdDaily" || !blk.Until.Equal(utcDay(t0).AddDate(0, 0, 1)) {
		t.Errorf("$0.005 at $0.006 of $0.01 = %+v %v, want BUDGET_EXCEEDED budgetUsdDaily until midnight", blk, blocked)
	}
	if r.SpendNow(t0) != (Spend{Day: 6_000, Month: 6_000}) {
		t.Errorf("SpendBlocked changed the spend: %+v", r.SpendNow(t0))
	}
	next := t0.AddDate(0, 0, 1) // a new day of the same month
	blk, blocked = r.SpendBlocked(l, 6_001, next)
	if !blocked || blk.Limit != "budgetUsdMonthly" || !blk.Until.Equal(utcMonth(t0).AddDate(0, 1, 0)) {
		t.Errorf("$0.006001 at $0.006 of the month's $0.012 = %+v %v, want budgetUsdMonthly until the month's end", blk, blocked)
	}
}

// TestYesterdaysSpendWaitsForTheStore: the money side of the same: a $0.30
// reservation made before UTC midnight and settled at $0.04 after it, while the
// spend store fails, stays pending through a flush the store fails again and
// then corrects yesterday's row ($0.04) once the store is back.
func TestYesterdaysSpendWaitsForTheStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	u := newSpendStore()
	var r State
	l := &Limits{BudgetDay: 1_000_000, BudgetMonth: 10_000_000, GateBudget: "key-budget:k"}
	b := Budget{ID: "key:k", DayID: "k", L: l, R: &r, U: u}
	yesterday := time.Date(2026, 3, 9, 23, 59, 59, 0, time.UTC)
	today := yesterday.Add(2 * time.Second)
	var rs Reservation
	if _, v := rs.ReserveSpend(ctx, Local{}, d, b, 300_000, yesterday); v != DispatchOK {
		t.Fatalf("reserve before midnight: %v", v)
	}
	setFail := func(fail bool) {
		u.mu.Lock()
		u.fail = fail
		u.mu.Unlock()
	}
	setFail(true)
	rs.Settle(ctx, Local{}, d, Usage{Known: true, Cost: 40_000}, today)
	d.Retry()
	d.FlushSpend(ctx, u, "k", &r, today) // the store fails again
	if !r.Pending() {
		t.Fatal("yesterday's settlement was dropped by the store's failures")
	}
	setFail(false)
	d.Retry()
	d.FlushSpend(ctx, u, "k", &r, today)
	if sp, _ := u.Spend(ctx, "k", yesterday); sp.Day != 40_000 {
		t.Errorf("store's spend for yesterday %d µ$, want 40000", sp.Day)
	}
	if r.Pending() {
		t.Error("spend still pending after the store took it")
	}
}
