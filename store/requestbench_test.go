//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// generateRequestsSQL fills the request log with n rows over the 7 days before $1
// (one every ~600 ms): 20 keys, 5 connections, 90 % served, 7 % 429
// SEMAPHORE_TIMEOUT, 3 % 502; ids random (v4), as the benchmark needs no order in them.
const generateRequestsSQL = `
INSERT INTO requests (id, started_at, key_id, key_name, connection_id, connection_name, provider, model,
    upstream_model, route, status, code, gate, attempts, queue_ms, ttft_ms, upstream_ms, total_ms,
    input_tokens, output_tokens, cost_micros, replica)
SELECT gen_random_uuid(),
       $1::timestamptz - (i * interval '1 millisecond' * (604800000 / $2::int)),
       ('10000000-0000-4000-8000-' || lpad((i % 20)::text, 12, '0'))::uuid, 'team-' || (i % 20),
       ('20000000-0000-4000-8000-' || lpad((i % 5)::text, 12, '0'))::uuid, 'conn-' || (i % 5), 'zai',
       'glm-' || (i % 3), 'glm-' || (i % 3), 'chat',
       CASE WHEN i % 100 < 90 THEN 200 WHEN i % 100 < 97 THEN 429 ELSE 502 END,
       CASE WHEN i % 100 BETWEEN 90 AND 96 THEN 'SEMAPHORE_TIMEOUT' END,
       CASE WHEN i % 100 BETWEEN 90 AND 96 THEN 'model:x:glm-5' END,
       CASE WHEN i % 100 BETWEEN 90 AND 96 THEN 0 ELSE 1 END,
       i % 300, 20 + i % 50, 100 + i % 400, 120 + i % 500, 1000, 500, 6000, 'bench'
FROM generate_series(1, $2::int) AS i`

// BenchmarkListRequestsFiltered reads the first page (50 rows) of filtered views of
// a request log of 1 000 000 rows: one key's 429s; one connection's requests in the
// last 24 hours; every request; one key's second page through the cursor; one
// error code; and one row by its id (GetRequest).
// Run: go test -run XXX -bench ListRequestsFiltered -benchtime 50x ./store/
func BenchmarkListRequestsFiltered(b *testing.B) {
	s := newStoreTB(b)
	ctx := b.Context()
	now := time.Now().UTC()
	if err := s.EnsureRequestPartitions(ctx, now.AddDate(0, 0, -8), now.AddDate(0, 0, 1)); err != nil {
		b.Fatal(err)
	}
	const rows = 1_000_000
	pool := poolOfTB(b, s)
	start := time.Now()
	if _, err := pool.Exec(ctx, generateRequestsSQL, now, rows); err != nil {
		b.Fatalf("generate: %v", err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE requests`); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d rows in %v", rows, time.Since(start).Round(time.Millisecond))
	// One row as the writer makes it (a UUIDv7 id), for the lookup by id.
	one := []store.RequestRow{{StartedAt: now.Add(-time.Hour), Route: "chat", Status: 200, TTFTMs: -1}}
	if err := s.WriteRequests(ctx, one); err != nil {
		b.Fatal(err)
	}
	b.Run("id", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.GetRequest(ctx, one[0].ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	key := "10000000-0000-4000-8000-000000000012" // i % 20 = 12: some of its rows are 429s
	first, cur, err := s.ListRequests(ctx, store.RequestFilter{Key: key, Limit: 50})
	if err != nil || len(first) != 50 || cur == nil {
		b.Fatalf("first page: %d rows, %v", len(first), err)
	}
	for _, bc := range []struct {
		name string
		f    store.RequestFilter
	}{
		{"key+status", store.RequestFilter{Key: key, Status: 429, Limit: 50}},
		{"connection+last24h", store.RequestFilter{Connection: "20000000-0000-4000-8000-000000000003", Since: now.Add(-24 * time.Hour), Until: now, Limit: 50}},
		{"all", store.RequestFilter{Limit: 50}},
		{"key+cursor", store.RequestFilter{Key: key, After: cur, Limit: 50}},
		{"code", store.RequestFilter{Code: "SEMAPHORE_TIMEOUT", Limit: 50}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				got, _, err := s.ListRequests(ctx, bc.f)
				if err != nil || len(got) != 50 {
					b.Fatalf("%d rows, %v", len(got), err)
				}
			}
		})
	}
}

// BenchmarkRequestLogFlush measures the writer's cost: each iteration adds 1 000 rows
// (20 keys, 5 connections, as the gateway makes them) and flushes them with one COPY
// and the spend upsert, in a real Postgres. Reported per row. "retried" writes each
// batch as after a commit whose answer was lost: staged, then inserted where absent.
// Run: go test -run XXX -bench RequestLogFlush -benchtime 200x ./store/
func BenchmarkRequestLogFlush(b *testing.B) {
	s := newStoreTB(b)
	ctx := b.Context()
	now := time.Now().UTC()
	if _, err := s.MaintainRequests(ctx, now, 0); err != nil {
		b.Fatal(err)
	}
	l := s.NewRequestLog(store.RequestLogOptions{Buffer: 1000, Batch: 1000, Interval: time.Hour})
	rows := make([]store.RequestRow, 1000)
	for i := range rows {
		rows[i] = store.RequestRow{StartedAt: now, KeyID: fmt.Sprintf("10000000-0000-4000-8000-%012d", i%20),
			KeyName: fmt.Sprint("team-", i%20), ConnectionID: fmt.Sprintf("20000000-0000-4000-8000-%012d", i%5),
			ConnectionName: fmt.Sprint("conn-", i%5), Provider: "zai", Model: "glm-5", UpstreamModel: "glm-5",
			Route: "chat", Status: 200, Attempts: 1, TTFTMs: 20, UpstreamMs: 100, TotalMs: 120,
			InputTokens: 1000, OutputTokens: 500, CostMicros: 6000, Replica: "bench"}
	}
	for _, retried := range []bool{false, true} {
		b.Run(map[bool]string{false: "first", true: "retried"}[retried], func(b *testing.B) {
			for b.Loop() {
				for i := range rows {
					l.Add(&rows[i])
				}
				if retried {
					l.SetAmbiguous()
				}
				l.FlushNow(ctx)
			}
			if st := l.Stats(); st.Written != st.Added {
				b.Fatalf("Stats = %+v: every row must be written", st)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
		})
	}
}
