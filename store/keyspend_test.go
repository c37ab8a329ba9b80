package store_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestReserveClientKeySpend: a money reservation is added to the day and the
// month only while both stay within their budgets, a fresh period included;
// one that fits the day but not the month adds to neither; a settled
// difference frees room; a new day starts from nothing but the month
// remembers; an unknown key is ErrNotFound.
func TestReserveClientKeySpend(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	k, _, err := s.CreateClientKey(ctx, "tester", store.NewClientKeyInput("spend-reserve"))
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	reserve := func(at time.Time, n, dayLimit, monthLimit int64) (store.KeySpend, store.SpendPeriod) {
		t.Helper()
		sp, blocked, err := s.ReserveClientKeySpend(ctx, k.ID, at, n, dayLimit, monthLimit)
		if err != nil {
			t.Fatal(err)
		}
		return sp, blocked
	}
	if sp, b := reserve(day, 20_000, 10_000, 0); b != store.SpendDay || sp != (store.KeySpend{}) {
		t.Fatalf("fresh day, 20000 of 10000: %+v %v", sp, b)
	}
	if sp, b := reserve(day, 4_000, 10_000, 30_000); b != store.SpendFits || sp != (store.KeySpend{Day: 4_000, Month: 4_000}) {
		t.Fatalf("4000: %+v %v", sp, b)
	}
	if sp, b := reserve(day, 4_000, 10_000, 30_000); b != store.SpendFits || sp != (store.KeySpend{Day: 8_000, Month: 8_000}) {
		t.Fatalf("4000 more: %+v %v", sp, b)
	}
	if sp, b := reserve(day, 4_000, 10_000, 30_000); b != store.SpendDay || sp != (store.KeySpend{Day: 8_000, Month: 8_000}) {
		t.Fatalf("a third 4000: %+v %v", sp, b)
	}
	// The first answer cost 1500 of its 4000.
	if sp, err := s.AddClientKeySpend(ctx, k.ID, day, -2_500); err != nil || sp != (store.KeySpend{Day: 5_500, Month: 5_500}) {
		t.Fatalf("settle -2500: %+v %v", sp, err)
	}
	if sp, b := reserve(day, 4_000, 10_000, 30_000); b != store.SpendFits || sp.Day != 9_500 {
		t.Fatalf("4000 after settling: %+v %v", sp, b)
	}
	// The month's budget: fits the day, not the month — neither is added.
	if sp, b := reserve(day, 500, 10_000, 9_999); b != store.SpendMonth || sp != (store.KeySpend{Day: 9_500, Month: 9_500}) {
		t.Fatalf("past the month: %+v %v", sp, b)
	}
	next := day.AddDate(0, 0, 1)
	if sp, b := reserve(next, 3_000, 10_000, 12_500); b != store.SpendFits || sp != (store.KeySpend{Day: 3_000, Month: 12_500}) {
		t.Fatalf("next day: %+v %v", sp, b)
	}
	if sp, b := reserve(next, 1, 10_000, 12_500); b != store.SpendMonth || sp != (store.KeySpend{Day: 3_000, Month: 12_500}) {
		t.Fatalf("month spent: %+v %v", sp, b)
	}
	// Giving back never goes below zero; the next month starts afresh.
	if sp, err := s.AddClientKeySpend(ctx, k.ID, next, -1_000_000); err != nil || sp != (store.KeySpend{}) {
		t.Fatalf("give back all: %+v %v", sp, err)
	}
	if sp, err := s.ClientKeyBudgetSpend(ctx, k.ID, day); err != nil || sp != (store.KeySpend{Day: 9_500}) {
		t.Fatalf("earlier day read back: %+v %v", sp, err)
	}
	if sp, b := reserve(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), 7, 0, 0); b != store.SpendFits || sp != (store.KeySpend{Day: 7, Month: 7}) {
		t.Fatalf("no limits, next month: %+v %v", sp, b)
	}
	unknown := "00000000-0000-4000-8000-000000000000"
	if _, _, err := s.ReserveClientKeySpend(ctx, unknown, day, 1, 10, 10); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key, fits: err = %v, want ErrNotFound", err)
	}
	if _, _, err := s.ReserveClientKeySpend(ctx, unknown, day, 100, 10, 10); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key, too much: err = %v, want ErrNotFound", err)
	}
	if _, err := s.AddClientKeySpend(ctx, unknown, day, 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key, add: err = %v, want ErrNotFound", err)
	}
}

// TestReserveClientKeySpendConcurrent: 30 callers reserving $0.004 at once
// against a day of $0.01 and a month of $0.02, on three days: 2 fit each of
// the first two days, 1 the third (the month is then full) — never past
// either budget, and a blocked reservation leaves no trace in the other
// period.
func TestReserveClientKeySpendConcurrent(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	k, _, err := s.CreateClientKey(ctx, "tester", store.NewClientKeyInput("spend-race"))
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 5, 20, 8, 0, 0, 0, time.UTC)
	race := func(at time.Time, n int) int64 {
		var (
			wg       sync.WaitGroup
			accepted atomic.Int64
		)
		for range n {
			wg.Go(func() {
				_, b, err := s.ReserveClientKeySpend(ctx, k.ID, at, 4_000, 10_000, 20_000)
				if err != nil {
					t.Errorf("ReserveClientKeySpend: %v", err)
				}
				if b == store.SpendFits {
					accepted.Add(1)
				}
			})
		}
		wg.Wait()
		return accepted.Load()
	}
	if n := race(day, 30); n != 2 {
		t.Errorf("day 1: %d of 30 reservations of 4000 fit a day of 10000, want 2", n)
	}
	next := day.AddDate(0, 0, 1)
	if n := race(next, 30); n != 2 {
		t.Errorf("day 2: %d of 30 fit (month 20000, 8000 spent), want 2", n)
	}
	if n := race(next.AddDate(0, 0, 1), 30); n != 1 {
		t.Errorf("day 3: %d of 30 fit (month 20000, 16000 spent), want 1", n)
	}
	sp, err := s.ClientKeyBudgetSpend(ctx, k.ID, next.AddDate(0, 0, 1))
	if err != nil || sp != (store.KeySpend{Day: 4_000, Month: 20_000}) {
		t.Errorf("spend %+v (%v), want day 4000, month 20000", sp, err)
	}
}
