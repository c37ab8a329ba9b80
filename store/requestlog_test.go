package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// runLog starts l.Run and returns a stop function that ends it and waits for its
// final flush.
func runLog(t *testing.T, l *store.RequestLog) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx) })
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// waitEnv names a duration that replaces waitFor's bound of 30 s. The writer
// takes a flush interval or two (tens of milliseconds) to get where a test waits
// for it; scripts/mutate sets a few seconds, so a mutant that loses a row fails
// in seconds rather than at the whole bound.
const waitEnv = "GATEHOUSE_TEST_WAIT"

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	bound := 30 * time.Second
	if v := os.Getenv(waitEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration", waitEnv, v)
		}
		bound = d
	}
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitWritten waits until l has written n rows, and fails at once when one is
// dropped instead (refused by the database, say): none of them may be.
func waitWritten(t *testing.T, l *store.RequestLog, n int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d rows written", n), func() bool {
		st := l.Stats()
		if st.Dropped > 0 {
			t.Fatalf("waiting for %d rows written: %+v, rows dropped", n, st)
		}
		return st.Written == n
	})
}

func countRequests(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM requests`).Scan(&n); err != nil {
		t.Fatalf("count requests: %v", err)
	}
	return n
}

func TestRequestLogWritesListsAndAggregates(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	pool := poolOf(t, s)
	l := s.NewRequestLog(store.RequestLogOptions{Batch: 10, Interval: 50 * time.Millisecond})
	stop := runLog(t, l)

	base := time.Now().UTC().Truncate(time.Hour)
	keyA, keyB := "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	conn := "33333333-3333-4333-8333-333333333333"
	var want []store.RequestRow
	for i := range 25 {
		r := store.RequestRow{
			StartedAt: base.Add(time.Duration(i) * time.Second), KeyID: keyA, KeyName: "team-a",
			ConnectionID: conn, ConnectionName: "zai-main", Provider: "zai", Model: "zai/glm-5",
			UpstreamModel: "glm-5", Route: "chat", Status: 200, Attempts: 1, QueueMs: i, TTFTMs: 5,
			UpstreamMs: 10, TotalMs: 12, InputTokens: 1000, OutputTokens: 500, CachedTokens: 600,
			CacheWriteTokens: 300, CostMicros: 6000, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Replica: "r1",
		}
		if i%5 == 4 {
			r.KeyID, r.KeyName, r.Status, r.Code, r.Gate = keyB, "team-b", 429, "SEMAPHORE_TIMEOUT", "key:"+keyB
			r.Attempts, r.TTFTMs, r.InputTokens, r.OutputTokens, r.CostMicros = 0, -1, 0, 0, 0
			r.CachedTokens, r.CacheWriteTokens = 0, 0
			r.ConnectionID, r.ConnectionName, r.UpstreamModel, r.Provider = "", "", "", ""
		} else if i%5 == 1 {
			r.Session, r.Affinity = "0123456789abcdef", "spilled"
		}
		// A model name with a NUL byte and bad UTF-8 is stored, cleaned, not refused.
		if i == 3 {
			r.Model = "bad\x00model\xff"
		}
		if !l.Add(&r) {
			t.Fatalf("Add %d refused", i)
		}
		want = append(want, r)
	}
	waitWritten(t, l, 25)
	stop()
	if got := countRequests(t, pool); got != 25 {
		t.Fatalf("rows in requests = %d, want 25", got)
	}
	if st := l.Stats(); st != (store.RequestLogStats{Added: 25, Written: 25}) {
		t.Errorf("Stats = %+v, want 25 added and written", st)
	}

	// Newest first, in pages of 10, ids set by the writer.
	var got []store.RequestRow
	var cur *store.RequestCursor
	for range 10 {
		page, next, err := s.ListRequests(t.Context(), store.RequestFilter{Limit: 10, After: cur})
		if err != nil {
			t.Fatalf("ListRequests: %v", err)
		}
		got = append(got, page...)
		if cur = next; cur == nil {
			break
		}
	}
	if len(got) != 25 {
		t.Fatalf("paged through %d rows, want 25", len(got))
	}
	slices.Reverse(want)
	want[21].Model = "badmodel" // i == 3, cleaned
	for i := range got {
		if got[i].ID == "" {
			t.Fatalf("row %d has no id", i)
		}
		want[i].ID = got[i].ID
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listed rows mismatch (-want +got):\n%s", diff)
	}

	one, err := s.GetRequest(t.Context(), got[0].ID)
	if err != nil {
		t.Fatalf("GetRequest: %v", err)
	}
	if diff := cmp.Diff(got[0], one); diff != "" {
		t.Errorf("GetRequest mismatch (-want +got):\n%s", diff)
	}
	if _, err := s.GetRequest(t.Context(), "01890000-0000-7000-8000-000000000000"); err == nil {
		t.Error("GetRequest of an unknown id: no error")
	}

	for _, tc := range []struct {
		name string
		f    store.RequestFilter
		want int
	}{
		{"key id", store.RequestFilter{Key: keyB}, 5},
		{"key name", store.RequestFilter{Key: "team-a"}, 20},
		{"connection", store.RequestFilter{Connection: conn}, 20},
		{"status", store.RequestFilter{Status: 429}, 5},
		{"status class", store.RequestFilter{StatusClass: 2}, 20},
		{"code", store.RequestFilter{Code: "SEMAPHORE_TIMEOUT", Key: keyB}, 5},
		{"model upstream", store.RequestFilter{Model: "glm-5"}, 20},
		{"session", store.RequestFilter{Session: "0123456789abcdef"}, 5},
		{"since until", store.RequestFilter{Since: base.Add(10 * time.Second), Until: base.Add(20 * time.Second)}, 10},
	} {
		rows, _, err := s.ListRequests(t.Context(), tc.f)
		if err != nil {
			t.Fatalf("%s: ListRequests: %v", tc.name, err)
		}
		if len(rows) != tc.want {
			t.Errorf("%s: %d rows, want %d", tc.name, len(rows), tc.want)
		}
	}

	usage, err := s.RequestUsage(t.Context(), store.UsageQuery{GroupBy: "key", Bucket: "hour",
		Since: base.Add(-time.Hour), Until: base.Add(time.Hour)})
	if err != nil {
		t.Fatalf("RequestUsage: %v", err)
	}
	wantUsage := []store.UsageRow{
		{Bucket: base, Group: "team-a", GroupID: keyA, Requests: 20, InputTokens: 20000, OutputTokens: 10000,
			CachedTokens: 12000, CacheWriteTokens: 6000, CostMicros: 120000},
		{Bucket: base, Group: "team-b", GroupID: keyB, Requests: 5, Errors: 5, Rejected: 5},
	}
	if diff := cmp.Diff(wantUsage, usage); diff != "" {
		t.Errorf("usage by key mismatch (-want +got):\n%s", diff)
	}
	if len(usage) == 2 {
		if got := [2]float64{usage[0].CacheHitRatio(), usage[1].CacheHitRatio()}; got != [2]float64{0.6, 0} {
			t.Errorf("cache-hit ratios = %v, want [0.6 0] (reads ÷ input, 0 without input)", got)
		}
	}
	if _, err := s.RequestUsage(t.Context(), store.UsageQuery{GroupBy: "secret", Bucket: "hour"}); err == nil {
		t.Error("RequestUsage with an unknown groupBy: no error")
	}

	// Spend sums the dispatched rows of the same batches, per day, key, connection
	// and model: team-a's 20 requests of 6000 micro-dollars; team-b was refused.
	for _, tc := range []struct {
		key  string
		want store.Spend
	}{{keyA, store.Spend{TodayMicros: 120000, MonthMicros: 120000}}, {keyB, store.Spend{}}} {
		got, err := s.ClientKeySpend(t.Context(), tc.key, base)
		if err != nil {
			t.Fatalf("ClientKeySpend: %v", err)
		}
		if got != tc.want {
			t.Errorf("ClientKeySpend(%s) = %+v, want %+v", tc.key, got, tc.want)
		}
	}
	nextMonth := time.Date(base.Year(), base.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	if got, _ := s.ClientKeySpend(t.Context(), keyA, nextMonth); got != (store.Spend{}) {
		t.Errorf("spend in the next month = %+v, want none", got)
	}
	// Every key's in one query: today's and the month's; the next day keeps the month's.
	tomorrow := base.AddDate(0, 0, 1)
	wantTomorrow := map[string]store.Spend{keyA: {MonthMicros: 120000}}
	if tomorrow.Month() != base.Month() {
		wantTomorrow = map[string]store.Spend{}
	}
	for _, tc := range []struct {
		at   time.Time
		want map[string]store.Spend
	}{{base, map[string]store.Spend{keyA: {TodayMicros: 120000, MonthMicros: 120000}}}, {tomorrow, wantTomorrow}, {nextMonth, map[string]store.Spend{}}} {
		got, err := s.ClientKeysSpend(t.Context(), tc.at)
		if err != nil {
			t.Fatalf("ClientKeysSpend: %v", err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ClientKeysSpend(%v) (-want +got):\n%s", tc.at, diff)
		}
	}
}

// TestRequestLogRetention moves a fake clock through the days: partitions are made
// ahead, and dropped once their day ended more than the retention ago.
func TestRequestLogRetention(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	day0 := time.Date(2030, 3, 10, 15, 0, 0, 0, time.UTC)
	if _, err := s.MaintainRequests(t.Context(), day0, 7*24*time.Hour); err != nil {
		t.Fatalf("MaintainRequests: %v", err)
	}
	parts, err := s.RequestPartitions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"requests_p20300310", "requests_p20300311", "requests_p20300312"}, parts); diff != "" {
		t.Fatalf("partitions made ahead mismatch (-want +got):\n%s", diff)
	}
	// A row at the day's last microsecond goes in that day's partition, a row at
	// midnight UTC in the next one.
	pool := poolOf(t, s)
	for _, at := range []time.Time{day0, time.Date(2030, 3, 10, 23, 59, 59, 999999000, time.UTC), time.Date(2030, 3, 11, 0, 0, 0, 0, time.UTC)} {
		if _, err := pool.Exec(t.Context(), `INSERT INTO requests (id, started_at, route, status) VALUES (gen_random_uuid(), $1, 'chat', 200)`, at); err != nil {
			t.Fatalf("insert at %v: %v", at, err)
		}
	}
	var in10 int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM requests_p20300310`).Scan(&in10); err != nil || in10 != 2 {
		t.Fatalf("rows in the 10th's partition = %d (%v), want 2", in10, err)
	}

	for _, tc := range []struct {
		now         time.Time
		wantDropped []string
		wantFirst   string
	}{
		// The 10th ended at the 11th 00:00; 7 days later is the 18th 00:00.
		{time.Date(2030, 3, 17, 23, 59, 0, 0, time.UTC), nil, "requests_p20300310"},
		{time.Date(2030, 3, 18, 0, 0, 0, 0, time.UTC), []string{"requests_p20300310"}, "requests_p20300311"},
		{time.Date(2030, 3, 20, 12, 0, 0, 0, time.UTC), []string{"requests_p20300311", "requests_p20300312"}, "requests_p20300317"},
	} {
		dropped, err := s.MaintainRequests(t.Context(), tc.now, 7*24*time.Hour)
		if err != nil {
			t.Fatalf("MaintainRequests(%v): %v", tc.now, err)
		}
		if diff := cmp.Diff(tc.wantDropped, dropped); diff != "" {
			t.Errorf("at %v: dropped mismatch (-want +got):\n%s", tc.now, diff)
		}
		parts, _ := s.RequestPartitions(t.Context())
		if len(parts) == 0 || parts[0] != tc.wantFirst {
			t.Errorf("at %v: partitions %v, want the oldest %s", tc.now, parts, tc.wantFirst)
		}
		ahead := "requests_p" + tc.now.AddDate(0, 0, 2).Format("20060102")
		if !slices.Contains(parts, ahead) {
			t.Errorf("at %v: partition %s (two days ahead) missing from %v", tc.now, ahead, parts)
		}
	}
	if got := countRequests(t, pool); got != 0 {
		t.Errorf("%d rows left after their partitions were dropped", got)
	}
}

// TestRequestLogFullBufferDrops: with the writer not running, the buffer keeps
// exactly its size and counts the rest as dropped; stopping flushes what it holds.
func TestRequestLogFullBufferDrops(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	l := s.NewRequestLog(store.RequestLogOptions{Buffer: 100, Batch: 100, Interval: time.Hour})
	row := store.RequestRow{StartedAt: time.Now(), Route: "chat", Status: 200}
	kept := 0
	for range 150 {
		if l.Add(&row) {
			kept++
		}
	}
	if kept != 100 {
		t.Fatalf("kept %d rows, want the buffer's 100", kept)
	}
	stop := runLog(t, l)
	stop()
	st := l.Stats()
	if st != (store.RequestLogStats{Added: 150, Written: 100, Dropped: 50}) {
		t.Errorf("Stats = %+v, want 150 added, 100 written, 50 dropped", st)
	}
	if got := countRequests(t, poolOf(t, s)); got != 100 {
		t.Errorf("rows = %d, want 100", got)
	}
	if l.Add(&row) {
		t.Error("Add after stop kept the row")
	}
	if st := l.Stats(); st.Added != st.Written+st.Dropped {
		t.Errorf("after stop: added %d != written %d + dropped %d", st.Added, st.Written, st.Dropped)
	}
}

// TestRequestLogDatabaseOutage stops the database under a stream of rows: Add never
// blocks, the rows that do not fit are dropped and counted, the writer resumes when
// the database is back, and written + dropped = added exactly.
func TestRequestLogDatabaseOutage(t *testing.T) {
	t.Parallel()
	c := storetest.Cluster(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	s, err := store.New(pool, testSecretKey(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	l := s.NewRequestLog(store.RequestLogOptions{Buffer: 200, Batch: 50, Interval: 20 * time.Millisecond})
	stop := runLog(t, l)
	add := func(n int) {
		for i := range n {
			r := store.RequestRow{StartedAt: time.Now(), Route: "chat", Status: 200, Model: fmt.Sprint("m", i)}
			l.Add(&r)
		}
	}
	add(100)
	waitFor(t, "the first rows written", func() bool { return l.Stats().Written == 100 })

	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stop the database: %v", err)
	}
	// While it is away: 1000 rows, far more than buffer + failed batch (400).
	addStart := time.Now()
	add(1000)
	if d := time.Since(addStart); d > 5*time.Second {
		t.Errorf("Add took %v for 1000 rows while the database was away: it must not wait for it", d)
	}
	waitFor(t, "rows dropped while the database is away", func() bool { return l.Stats().Dropped >= 600 })
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start the database: %v", err)
	}
	waitFor(t, "the writer to resume", func() bool { st := l.Stats(); return st.Written+st.Dropped == st.Added })
	add(100)
	waitFor(t, "rows after the outage written", func() bool { st := l.Stats(); return st.Written+st.Dropped == 1200 })
	stop()
	st := l.Stats()
	if st.Added != 1200 || st.Written+st.Dropped != st.Added {
		t.Fatalf("Stats = %+v: want written + dropped = added = 1200", st)
	}
	if st.Written < 200 {
		t.Errorf("written %d: the rows before and after the outage (200) must be among them", st.Written)
	}
	if got := countRequests(t, pool); got != st.Written {
		t.Errorf("rows in requests = %d, Stats.Written = %d", got, st.Written)
	}
}

// A row added to a buffer with room costs no allocation (cmd hands the gateway's
// record over by a pointer conversion; Add copies it once).
func TestRequestLogAddAllocatesNothing(t *testing.T) {
	s := newStore(t)
	l := s.NewRequestLog(store.RequestLogOptions{Buffer: 1000, Batch: 1000, Interval: time.Hour})
	row := store.RequestRow{StartedAt: time.Now(), KeyID: "11111111-1111-4111-8111-111111111111", KeyName: "team-a",
		Route: "chat", Status: 200, TTFTMs: -1}
	// 501 rows (AllocsPerRun's warm-up and 500), within the buffer's first batch.
	if n := testing.AllocsPerRun(500, func() { l.Add(&row) }); n != 0 {
		t.Errorf("Add allocates %v times per row, want 0", n)
	}
	if st := l.Stats(); st != (store.RequestLogStats{Added: 501}) {
		t.Errorf("Stats = %+v, want 501 added, none dropped", st)
	}
}
