package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/scrub"
	"github.com/gatehouse-dev/gatehouse/store"
)

// A row's values at the edges of their columns come back as the writer is
// meant to store them: a first byte at 0 ms is a time (not "none"), times are
// clamped to int4, long text is cut to its column's bound, NUL bytes are
// removed wherever they are, and the upstream's message keeps
// scrub.MaxMessage + 64 bytes. The spend of a model whose name starts with a
// NUL byte is summed under the cleaned name.
func TestWriteRequestsStoresEdgeValues(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	const key, conn = "11111111-1111-4111-8111-111111111111", "33333333-3333-4333-8333-333333333333"
	at := time.Now().UTC().Truncate(time.Millisecond)
	rows := []store.RequestRow{{
		StartedAt: at, KeyID: key, KeyName: strings.Repeat("k", 100), ConnectionID: conn,
		ConnectionName: "\x00conn", Provider: "pro\x00vider", Model: "glm-5", UpstreamModel: "\x00glm-5",
		Route: "chat", Status: 502, Attempts: 1, QueueMs: 1 << 40, TTFTMs: 0, UpstreamMs: -5, TotalMs: 7,
		CostMicros: 900, UpstreamError: strings.Repeat("x", 1000),
	}}
	if err := s.WriteRequests(t.Context(), rows); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}
	if rows[0].ID == "" {
		t.Fatal("WriteRequests left the row without an id")
	}
	got, err := s.GetRequest(t.Context(), rows[0].ID)
	if err != nil {
		t.Fatalf("GetRequest(the id WriteRequests set): %v", err)
	}
	if !got.StartedAt.Equal(at) {
		t.Errorf("started_at = %v, want %v", got.StartedAt, at)
	}
	if got.TTFTMs != 0 {
		t.Errorf("ttft = %d, want 0 (a first byte in under a millisecond is measured, not none)", got.TTFTMs)
	}
	if got.QueueMs != 1<<31-1 || got.UpstreamMs != 0 {
		t.Errorf("queue = %d ms, upstream = %d ms; want clamped to %d and 0", got.QueueMs, got.UpstreamMs, 1<<31-1)
	}
	if got.KeyName != strings.Repeat("k", 64) {
		t.Errorf("key name of %d bytes stored, want its first 64", len(got.KeyName))
	}
	if got.ConnectionName != "conn" || got.Provider != "provider" || got.UpstreamModel != "glm-5" {
		t.Errorf("connection %q, provider %q, upstream model %q: want the NUL bytes removed",
			got.ConnectionName, got.Provider, got.UpstreamModel)
	}
	if want := scrub.MaxMessage + 64; len(got.UpstreamError) != want {
		t.Errorf("upstream error of %d bytes stored, want its first %d", len(got.UpstreamError), want)
	}
	var model string
	var cost int64
	if err := poolOf(t, s).QueryRow(t.Context(), `SELECT model, cost_micros FROM spend_daily WHERE client_key_id = $1`, key).Scan(&model, &cost); err != nil {
		t.Fatalf("spend_daily: %v", err)
	}
	if model != "glm-5" || cost != 900 {
		t.Errorf("spend_daily has %q, %d µ$; want glm-5, 900", model, cost)
	}
}

// WriteRequests makes the partition of each day its rows fall in, a row at
// exactly midnight UTC in the new day's, and the spend of each goes to its day.
func TestWriteRequestsMakesEachDaysPartition(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	const key, conn = "11111111-1111-4111-8111-111111111111", "33333333-3333-4333-8333-333333333333"
	noon := time.Date(2031, 3, 1, 12, 0, 0, 0, time.UTC)
	midnight := time.Date(2031, 3, 2, 0, 0, 0, 0, time.UTC)
	row := func(at time.Time, cost int64) store.RequestRow {
		return store.RequestRow{StartedAt: at, KeyID: key, ConnectionID: conn, UpstreamModel: "glm-5",
			Route: "chat", Status: 200, Attempts: 1, CostMicros: cost, TTFTMs: -1}
	}
	if err := s.WriteRequests(t.Context(), []store.RequestRow{row(noon, 10), row(midnight, 1000)}); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}
	// Ids written by someone else: a v4, and a v7 of another time of the same day.
	ms := fmt.Sprintf("%012x", noon.Add(-time.Hour).UnixMilli())
	v4, v7 := "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa", ms[:8]+"-"+ms[8:]+"-7abc-8abc-0123456789ab"
	others := []store.RequestRow{
		{ID: v4, StartedAt: noon.Add(time.Second), Route: "chat", Status: 200, TTFTMs: -1},
		{ID: v7, StartedAt: noon.Add(2 * time.Second), Route: "chat", Status: 200, TTFTMs: -1},
	}
	if err := s.WriteRequests(t.Context(), others); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}
	for _, r := range others {
		if got, err := s.GetRequest(t.Context(), r.ID); err != nil || !got.StartedAt.Equal(r.StartedAt) {
			t.Errorf("GetRequest(%s) = %v, %v; want the row of %v", r.ID, got.StartedAt, err, r.StartedAt)
		}
	}

	parts, err := s.RequestPartitions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"requests_p20310301", "requests_p20310302"} {
		if !strings.Contains(strings.Join(parts, " "), p) {
			t.Errorf("partition %s missing from %v", p, parts)
		}
	}
	for _, tc := range []struct {
		at   time.Time
		want int64
	}{{noon, 10}, {midnight, 1000}} {
		sp, err := s.ClientKeySpend(t.Context(), key, tc.at)
		if err != nil {
			t.Fatal(err)
		}
		if sp.TodayMicros != tc.want {
			t.Errorf("spend on %v = %d µ$, want %d", tc.at, sp.TodayMicros, tc.want)
		}
	}
}

// A row at exactly midnight UTC waits for its own day's partition, even right
// after a row of the day before: it is neither written early nor dropped.
func TestRequestLogRowAtMidnightWaitsForItsPartition(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	day := time.Date(2031, 4, 1, 0, 0, 0, 0, time.UTC)
	if err := s.EnsureRequestPartitions(t.Context(), day, day); err != nil {
		t.Fatal(err)
	}
	l := s.NewRequestLog(store.RequestLogOptions{Interval: time.Hour})
	for _, at := range []time.Time{day.Add(12 * time.Hour), day.AddDate(0, 0, 1)} {
		r := store.RequestRow{StartedAt: at, Route: "chat", Status: 200, TTFTMs: -1}
		l.Add(&r)
	}
	l.FlushNow(t.Context())
	if st := l.Stats(); st.Written != 1 || st.Dropped != 0 {
		t.Fatalf("after the first flush: %+v; want the noon row written and the midnight row kept", st)
	}
	if err := s.EnsureRequestPartitions(t.Context(), day.AddDate(0, 0, 1), day.AddDate(0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	l.FlushNow(t.Context())
	if st := l.Stats(); st != (store.RequestLogStats{Added: 2, Written: 2}) {
		t.Errorf("once its partition exists: %+v, want both written", st)
	}
}

// Rows kept for a missing partition take only their share of the buffer: each
// flush moves in as many new rows as fit beside them (Buffer in all) and writes
// those, and the kept rows are written once their partition exists.
func TestRequestLogKeptRowsLeaveRoomForNewOnes(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	now := time.Now().UTC()
	future := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	if err := s.EnsureRequestPartitions(t.Context(), now, now); err != nil {
		t.Fatal(err)
	}
	l := s.NewRequestLog(store.RequestLogOptions{Buffer: 10, Interval: time.Hour})
	add := func(at time.Time, n int) {
		for range n {
			r := store.RequestRow{StartedAt: at, Route: "chat", Status: 200, TTFTMs: -1}
			if !l.Add(&r) {
				t.Fatal("Add refused a row the buffer has room for")
			}
		}
	}
	add(future, 6)
	l.FlushNow(t.Context()) // the 6 wait for their partition
	add(now, 10)
	var written []int64
	for range 3 {
		l.FlushNow(t.Context())
		written = append(written, l.Stats().Written)
	}
	if want := []int64{4, 8, 10}; !slices.Equal(written, want) {
		t.Errorf("written after each flush = %v, want %v (4 new rows beside the 6 kept, then the rest)", written, want)
	}
	if err := s.EnsureRequestPartitions(t.Context(), future, future); err != nil {
		t.Fatal(err)
	}
	l.FlushNow(t.Context())
	if st := l.Stats(); st != (store.RequestLogStats{Added: 16, Written: 16}) {
		t.Errorf("once their partition exists: %+v, want all 16 written", st)
	}
}

// A page holding exactly the last rows has no next page; a listing of the
// aggregates refuses a bucket it does not offer (Postgres's date_trunc would
// take "week"); maintenance with no retention drops nothing.
func TestListRequestsLastFullPageAndUsageBuckets(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	base := time.Now().UTC().Truncate(time.Second)
	rows := make([]store.RequestRow, 3)
	for i := range rows {
		rows[i] = store.RequestRow{StartedAt: base.Add(time.Duration(i) * time.Millisecond), Route: "chat", Status: 200, TTFTMs: -1}
	}
	if err := s.WriteRequests(t.Context(), rows); err != nil {
		t.Fatal(err)
	}
	page, next, err := s.ListRequests(t.Context(), store.RequestFilter{Limit: 2})
	if err != nil || len(page) != 2 || next == nil {
		t.Fatalf("first page of 2: %d rows, next %v, %v; want 2 and a next page", len(page), next, err)
	}
	page, next, err = s.ListRequests(t.Context(), store.RequestFilter{Limit: 1, After: next})
	if err != nil || len(page) != 1 || next != nil {
		t.Errorf("last page of 1: %d rows, next %v, %v; want 1 and no next page", len(page), next, err)
	}
	if page, next, err := s.ListRequests(t.Context(), store.RequestFilter{Limit: 3}); err != nil || len(page) != 3 || next != nil {
		t.Errorf("one page of exactly 3: %d rows, next %v, %v; want 3 and no next page", len(page), next, err)
	}

	for _, b := range []string{"week", "month", ""} {
		_, err := s.RequestUsage(t.Context(), store.UsageQuery{GroupBy: "key", Bucket: b, Since: base.Add(-time.Hour), Until: base.Add(time.Hour)})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RequestUsage with bucket %q: %v, want ErrInvalid", b, err)
		}
	}
	for _, b := range []string{"minute", "hour", "day"} {
		u, err := s.RequestUsage(t.Context(), store.UsageQuery{GroupBy: "model", Bucket: b, Since: base.Add(-time.Hour), Until: base.Add(time.Hour)})
		if err != nil || len(u) != 1 || u[0].Requests != 3 {
			t.Errorf("RequestUsage by %s: %+v, %v; want one group of 3 requests", b, u, err)
		}
	}

	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.EnsureRequestPartitions(t.Context(), old, old); err != nil {
		t.Fatal(err)
	}
	if dropped, err := s.MaintainRequests(t.Context(), base, 0); err != nil || dropped != nil {
		t.Errorf("MaintainRequests with no retention dropped %v (%v), want none", dropped, err)
	}
	parts, _ := s.RequestPartitions(t.Context())
	if len(parts) == 0 || parts[0] != "requests_p20200101" {
		t.Errorf("partitions %v, want requests_p20200101 kept without a retention", parts)
	}
}

// A batch marked as maybe committed (an unknown outcome) whose commit in fact
// did not happen goes through the staging table: each row written once, with
// its spend.
func TestRequestLogAmbiguousBatchNotCommittedIsWritten(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	now := time.Now().UTC()
	if err := s.EnsureRequestPartitions(t.Context(), now, now); err != nil {
		t.Fatal(err)
	}
	l := s.NewRequestLog(store.RequestLogOptions{Interval: time.Hour})
	for range 3 {
		r := store.RequestRow{StartedAt: now, Route: "chat", Status: 200, KeyID: "11111111-1111-4111-8111-111111111111",
			ConnectionID: "33333333-3333-4333-8333-333333333333", UpstreamModel: "glm-5", Attempts: 1, CostMicros: 100, TTFTMs: -1}
		l.Add(&r)
	}
	l.SetAmbiguous()
	l.FlushNow(t.Context())
	pool := poolOf(t, s)
	var cost int64
	if err := pool.QueryRow(t.Context(), `SELECT coalesce(sum(cost_micros), 0)::bigint FROM spend_daily`).Scan(&cost); err != nil {
		t.Fatal(err)
	}
	if n := countRequests(t, pool); n != 3 || cost != 300 || l.Stats() != (store.RequestLogStats{Added: 3, Written: 3}) {
		t.Errorf("rows %d, spend %d µ$, %+v; want 3 rows, 300 µ$, 3 written", n, cost, l.Stats())
	}
}
