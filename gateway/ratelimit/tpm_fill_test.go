package ratelimit

import (
	"log/slog"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// TestReservationExactlyFillingTPMIsAccepted: with 600 of a 1 000-token
// minute used, a 400-token reservation fills the window exactly and is
// accepted (0 remaining); one token more is refused (RATE_LIMIT_TPM).
func TestReservationExactlyFillingTPMIsAccepted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	now := time.Date(2026, 3, 9, 12, 0, 10, 0, time.UTC)
	for _, tc := range []struct {
		amount int64
		ok     bool
	}{{400, true}, {401, false}} {
		var r State
		b := Budget{ID: "c", DayID: "c", L: &Limits{TPM: 1000, GateTPM: "tpm:c"}, R: &r}
		var first Reservation
		if _, v := first.Reserve(ctx, Local{}, d, b, 600, now); v != DispatchOK {
			t.Fatalf("first 600 tokens: %v", v)
		}
		var rs Reservation
		blk, v := rs.Reserve(ctx, Local{}, d, b, tc.amount, now.Add(time.Second))
		if got := v == DispatchOK; got != tc.ok {
			t.Errorf("%d tokens after 600 of 1000: accepted %v (block %+v), want %v", tc.amount, got, blk, tc.ok)
			continue
		}
		if !tc.ok {
			if blk.Code != CodeTPM {
				t.Errorf("%d tokens: block code %q, want %q", tc.amount, blk.Code, CodeTPM)
			}
			continue
		}
		if rem := r.Budgets(b.L, now.Add(time.Second))[live.BudgetTPM].Remaining; rem != 0 {
			t.Errorf("tpm remaining after filling the window = %d, want 0", rem)
		}
	}
}
