//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"math"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestBudgetCountsSaturate: no amount makes a day's tokens, requests or a
// key's spend wrap or fail the statement with "bigint out of range" (which
// the gateway would take for the store refusing a request): sums past the
// bigint range stay at its maximum, a reservation that would pass it does
// not fit, and a give-back from the maximum works.
func TestBudgetCountsSaturate(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	c := mustCreateConnection(t, s, connInput("saturate"))
	k, _, err := s.CreateClientKey(ctx, "tester", store.NewClientKeyInput("saturate"))
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const big = math.MaxInt64 - 10

	if total, ok, err := s.ReserveTokens(ctx, c.ID, day, big, 0); err != nil || !ok || total != big {
		t.Fatalf("reserve %d: %d %v %v", int64(big), total, ok, err)
	}
	if total, ok, err := s.ReserveTokens(ctx, c.ID, day, big, 0); err != nil || ok || total != big {
		t.Fatalf("reserve %d more without a limit: %d %v %v; want %d false (no overflow error)", int64(big), total, ok, err, int64(big))
	}
	u, err := s.AddUsageTotals(ctx, c.ID, day, math.MaxInt64, big)
	if err != nil || u.Tokens != math.MaxInt64 || u.Requests != math.MaxInt64 {
		t.Fatalf("add past the range: %+v %v; want both at the maximum", u, err)
	}
	if u, err = s.AddUsageTotals(ctx, c.ID, day, 0, -math.MaxInt64); err != nil || u.Tokens != 0 {
		t.Fatalf("give back everything: %+v %v; want 0 tokens", u, err)
	}

	if total, ok, err := s.ReserveClientKeyTokens(ctx, k.ID, day, big, 0); err != nil || !ok || total != big {
		t.Fatalf("key reserve: %d %v %v", total, ok, err)
	}
	if ku, err := s.AddClientKeyUsage(ctx, k.ID, day, 1, big); err != nil || ku.Tokens != math.MaxInt64 {
		t.Fatalf("key add past the range: %+v %v", ku, err)
	}

	sp, p, err := s.ReserveClientKeySpend(ctx, k.ID, day, big, 0, 0)
	if err != nil || p != store.SpendFits || sp.Day != big || sp.Month != big {
		t.Fatalf("spend reserve: %+v %v %v", sp, p, err)
	}
	if _, p, err := s.ReserveClientKeySpend(ctx, k.ID, day, big, 0, 0); err != nil || p == store.SpendFits {
		t.Fatalf("spend reserve past the range: %v %v; want a budget it did not fit, no error", p, err)
	}
	if sp, err := s.AddClientKeySpend(ctx, k.ID, day, big); err != nil || sp.Day != math.MaxInt64 || sp.Month != math.MaxInt64 {
		t.Fatalf("spend add past the range: %+v %v", sp, err)
	}
	if sp, err := s.AddClientKeySpend(ctx, k.ID, day, -math.MaxInt64); err != nil || sp.Day != 0 {
		t.Fatalf("spend give back: %+v %v", sp, err)
	}
}
