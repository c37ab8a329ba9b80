package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestSpendUpsertAddsAcrossFlushes: two flushes that land on the same spend_daily
// row (one key, UTC day, connection and upstream model) add up — requests, tokens
// and cost — rather than the second overwriting the first; the keys list, /usage
// and the API read these sums.
func TestSpendUpsertAddsAcrossFlushes(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	const key, conn = "55555555-5555-4555-8555-555555555555", "66666666-6666-4666-8666-666666666666"
	at := time.Date(2026, 11, 17, 9, 0, 0, 0, time.UTC)
	row := store.RequestRow{StartedAt: at, KeyID: key, ConnectionID: conn, Model: "glm-5", UpstreamModel: "glm-5",
		Route: "chat", Status: 200, Attempts: 1, InputTokens: 100, OutputTokens: 20, CostMicros: 6_000}
	for i := range 2 { // two flushes, each its own transaction
		r := row
		r.StartedAt = at.Add(time.Duration(i) * time.Minute)
		if err := s.WriteRequests(t.Context(), []store.RequestRow{r}); err != nil {
			t.Fatalf("WriteRequests %d: %v", i, err)
		}
	}

	totals, err := s.DayTotals(t.Context(), at)
	if err != nil {
		t.Fatalf("DayTotals: %v", err)
	}
	want := []store.DayTotal{{KeyID: key, ConnectionID: conn, Requests: 2, Tokens: 240, CostMicros: 12_000}}
	if diff := cmp.Diff(want, totals); diff != "" {
		t.Errorf("spend_daily after two flushes of $0.006 (-want +got):\n%s", diff)
	}
	sp, err := s.ClientKeySpend(t.Context(), key, at)
	if err != nil {
		t.Fatalf("ClientKeySpend: %v", err)
	}
	if want := (store.Spend{TodayMicros: 12_000, MonthMicros: 12_000}); sp != want {
		t.Errorf("ClientKeySpend = %+v, want %+v", sp, want)
	}
}
