package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// spendSums sums per (UTC day, key, connection, upstream model) whatever the
// order of the rows; refused rows (no attempt) and rows without a key or a
// connection count nothing.
func TestSpendSums(t *testing.T) {
	const keyA, keyB = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	const conn, conn2 = "33333333-3333-4333-8333-333333333333", "44444444-4444-4444-8444-444444444444"
	day := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	lateUTC := day.Add(24*time.Hour - time.Millisecond)
	row := func(at time.Time, key, model string, attempts int, cost int64) RequestRow {
		return RequestRow{StartedAt: at, KeyID: key, ConnectionID: conn, UpstreamModel: model, Attempts: attempts,
			InputTokens: 10, OutputTokens: 5, CostMicros: cost}
	}
	rows := []RequestRow{
		row(day.Add(time.Hour), keyA, "glm-5", 1, 100),
		row(day.Add(time.Hour), keyA, "glm-5", 2, 100),
		row(day.Add(2*time.Hour), keyB, "glm-5", 1, 7),
		row(day.Add(3*time.Hour), keyA, "glm-5", 1, 100), // back to A after B
		row(day.Add(3*time.Hour), keyA, "glm-4", 1, 1),
		{StartedAt: day.Add(3 * time.Hour), KeyID: keyA, ConnectionID: conn2, UpstreamModel: "glm-4", Attempts: 1,
			InputTokens: 10, OutputTokens: 5, CostMicros: 3}, // the same key and model on another connection
		row(lateUTC, keyA, "glm-5", 1, 100),
		row(lateUTC.Add(time.Millisecond), keyA, "glm-5", 1, 1000), // the next UTC day
		row(lateUTC.In(time.FixedZone("UTC-3", -3*3600)), keyA, "glm-5", 1, 100),
		row(day.Add(time.Hour), keyA, "glm-5", 0, 0),      // refused: not dispatched
		row(day.Add(time.Hour), "", "glm-5", 1, 50),       // no key
		row(day.Add(time.Hour), "team-a", "glm-5", 1, 50), // not a key id
	}
	var ss spendSums
	ss.add(rows)
	got := map[spendKey]spendSum{}
	for _, s := range ss.sums {
		k := s.spendKey
		k.day = k.day.UTC()
		s.spendKey = spendKey{}
		got[k] = s
	}
	next := day.AddDate(0, 0, 1)
	want := map[spendKey]spendSum{
		{day: day, keyID: keyA, connID: conn, model: "glm-5"}:  {requests: 5, in: 50, out: 25, cost: 500},
		{day: day, keyID: keyA, connID: conn, model: "glm-4"}:  {requests: 1, in: 10, out: 5, cost: 1},
		{day: day, keyID: keyA, connID: conn2, model: "glm-4"}: {requests: 1, in: 10, out: 5, cost: 3},
		{day: day, keyID: keyB, connID: conn, model: "glm-5"}:  {requests: 1, in: 10, out: 5, cost: 7},
		{day: next, keyID: keyA, connID: conn, model: "glm-5"}: {requests: 1, in: 10, out: 5, cost: 1000},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(spendSum{}, spendKey{})); diff != "" {
		t.Errorf("sums mismatch (-want +got):\n%s", diff)
	}
	ss.reset()
	if len(ss.sums) != 0 || len(ss.at) != 0 {
		t.Errorf("after reset: %d sums, %d keys", len(ss.sums), len(ss.at))
	}
}

// Summing a flush of keys seen before allocates nothing: the writer reuses its sums.
func TestSpendSumsAllocatesNothing(t *testing.T) {
	keys := []string{"11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222",
		"44444444-4444-4444-8444-444444444444"}
	rows := make([]RequestRow, 1000)
	at := time.Now()
	for i := range rows {
		rows[i] = RequestRow{StartedAt: at, KeyID: keys[i%len(keys)], ConnectionID: "33333333-3333-4333-8333-333333333333",
			UpstreamModel: "glm-5", Attempts: 1, InputTokens: 10, CostMicros: 60}
	}
	var ss spendSums
	ss.add(rows)
	ss.reset()
	if n := testing.AllocsPerRun(20, func() { ss.add(rows); ss.reset() }); n != 0 {
		t.Errorf("summing 1000 rows allocates %v times, want 0", n)
	}
}
