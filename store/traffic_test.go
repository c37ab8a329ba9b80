package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestRecentTrafficAndDayTotals: the last minute of the request log sums by
// connection, key, status and code (upstream failures are dispatched 429s and 5xx
// only), older rows are left out; the day's totals sum spend_daily by key and
// connection.
func TestRecentTrafficAndDayTotals(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	now := time.Now().UTC()
	key := "11111111-1111-4111-8111-111111111111"
	conn := "33333333-3333-4333-8333-333333333333"
	served := store.RequestRow{StartedAt: now.Add(-10 * time.Second), KeyID: key, ConnectionID: conn, Model: "glm-5",
		UpstreamModel: "glm-5", Route: "chat", Status: 200, Attempts: 1, InputTokens: 100, OutputTokens: 20, CostMicros: 70}
	upstream502 := served
	upstream502.Status, upstream502.InputTokens, upstream502.OutputTokens, upstream502.CostMicros = 502, 0, 0, 0
	refused := store.RequestRow{StartedAt: now.Add(-5 * time.Second), KeyID: key, Model: "nope", Route: "chat",
		Status: 404, Code: "MODEL_NOT_FOUND"}
	badKey := store.RequestRow{StartedAt: now.Add(-5 * time.Second), Route: "chat", Status: 401, Code: "INVALID_API_KEY"}
	old := served
	old.StartedAt = now.Add(-2 * time.Minute)
	rows := []store.RequestRow{served, served, upstream502, refused, badKey, badKey, old}
	if err := s.WriteRequests(t.Context(), rows); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}

	got, err := s.RecentTraffic(t.Context(), now.Add(-time.Minute), now)
	if err != nil {
		t.Fatalf("RecentTraffic: %v", err)
	}
	want := []store.TrafficRow{
		{Status: 401, Code: "INVALID_API_KEY", Requests: 2},
		{KeyID: key, Status: 404, Code: "MODEL_NOT_FOUND", Requests: 1},
		{ConnectionID: conn, KeyID: key, Status: 200, Requests: 2},
		{ConnectionID: conn, KeyID: key, Status: 502, Requests: 1, UpstreamFailures: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RecentTraffic mismatch (-want +got):\n%s", diff)
	}

	totals, err := s.DayTotals(t.Context(), now)
	if err != nil {
		t.Fatalf("DayTotals: %v", err)
	}
	// old is two minutes back: on the same UTC day unless the test runs just after midnight.
	wantTotal := store.DayTotal{KeyID: key, ConnectionID: conn, Requests: 4, Tokens: 360, CostMicros: 210}
	if old.StartedAt.Day() != now.Day() {
		wantTotal = store.DayTotal{KeyID: key, ConnectionID: conn, Requests: 3, Tokens: 240, CostMicros: 140}
	}
	if diff := cmp.Diff([]store.DayTotal{wantTotal}, totals); diff != "" {
		t.Errorf("DayTotals mismatch (-want +got):\n%s", diff)
	}
}
