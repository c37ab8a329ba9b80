package store_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// syncBuffer is a bytes.Buffer safe for a logger's writes from other goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// tableExists reports whether a relation of that name exists.
func tableExists(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(t.Context(), `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&ok); err != nil {
		t.Fatalf("look up %s: %v", name, err)
	}
	return ok
}

// TestRequestLogWritesWhileAReaderHoldsRequests: a transaction that has read requests
// (and so holds ACCESS SHARE on it and its partitions) until the end of the test
// blocks the partition DDL that maintenance needs (a partition to make ahead, one to
// drop past retention). The writer keeps writing meanwhile; maintenance gives up on
// its lock_timeout and, once the reader is gone, is retried and done.
func TestRequestLogWritesWhileAReaderHoldsRequests(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	var logs syncBuffer
	s, err := store.New(pool, testSecretKey(), slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	now := time.Now().UTC()
	if _, err := s.MaintainRequests(ctx, now, 0); err != nil {
		t.Fatalf("MaintainRequests: %v", err)
	}
	old := now.AddDate(0, 0, -30)
	if err := s.EnsureRequestPartitions(ctx, old, old); err != nil {
		t.Fatal(err)
	}
	oldName, aheadName := "requests_p"+old.Format("20060102"), "requests_p"+now.AddDate(0, 0, 3).Format("20060102")

	reader, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback(context.WithoutCancel(ctx))
	var n int64
	if err := reader.QueryRow(ctx, `SELECT count(*) FROM requests`).Scan(&n); err != nil {
		t.Fatalf("reader: %v", err)
	}

	// The log's clock is a day ahead: maintenance must make the partition three
	// days from now and drop the one 30 days old, both behind the reader.
	l := s.NewRequestLog(store.RequestLogOptions{Batch: 50, Interval: 20 * time.Millisecond, Retention: 7 * 24 * time.Hour,
		Now: func() time.Time { return time.Now().AddDate(0, 0, 1) }})
	l.SetMaintainRetry(50 * time.Millisecond)
	stop := runLog(t, l)
	for i := range 100 {
		r := store.RequestRow{StartedAt: time.Now(), Route: "chat", Status: 200, Model: fmt.Sprint("m", i)}
		l.Add(&r)
	}
	waitWritten(t, l, 100)
	if got := countRequests(t, pool); got != 100 {
		t.Errorf("rows visible = %d, want 100", got)
	}
	if !tableExists(t, pool, oldName) {
		t.Errorf("partition %s dropped while a reader held it: the drop cannot have waited for its lock", oldName)
	}

	// The operator is told that maintenance failed and is tried again.
	waitFor(t, "maintenance's failure behind the reader logged", func() bool {
		return strings.Contains(logs.String(), "request log: partition maintenance failed; tried again later")
	})

	if err := reader.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "maintenance retried once the reader is gone", func() bool {
		return !tableExists(t, pool, oldName) && tableExists(t, pool, aheadName)
	})
	stop()
	if st := l.Stats(); st != (store.RequestLogStats{Added: 100, Written: 100}) {
		t.Errorf("Stats = %+v, want 100 added and written", st)
	}
}

// TestRequestLogDropsARefusedRowAlone: a batch of 52 rows of which the database
// refuses one, or three (first, middle, last) — a CHECK constraint added for the
// test stands for any row Postgres refuses: the others are written with their
// spend, each refused one is dropped, counted and logged with its request id.
func TestRequestLogDropsARefusedRowAlone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		poison []int
	}{
		{"one", []int{26}},
		// As many as are logged one by one (maxRefusedLogged), first, middle and last among them.
		{"ten", []int{0, 5, 10, 15, 20, 25, 30, 35, 40, 51}},
		// Two more than that: the two are logged as a count.
		{"twelve", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 51}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testRefusedRows(t, tc.poison)
		})
	}
}

func testRefusedRows(t *testing.T, poison []int) {
	pool := storetest.Pool(t)
	var logs syncBuffer
	s, err := store.New(pool, testSecretKey(), slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := pool.Exec(ctx, `ALTER TABLE requests ADD CONSTRAINT requests_test_poison CHECK (model IS DISTINCT FROM 'poison')`); err != nil {
		t.Fatal(err)
	}
	l := s.NewRequestLog(store.RequestLogOptions{Batch: 52, Interval: time.Hour})
	const conn = "33333333-3333-4333-8333-333333333333"
	now := time.Now()
	var poisonIDs []string
	// Every row is added before the writer starts, so all 52 go in its first
	// flush: how many refused rows are logged one by one is per flush.
	for i := range 52 {
		r := store.RequestRow{StartedAt: now, Route: "chat", Status: 200, Model: "glm-5", UpstreamModel: "glm-5",
			KeyID: fmt.Sprintf("10000000-0000-4000-8000-%012d", i%3), ConnectionID: conn, Attempts: 1,
			InputTokens: 10, OutputTokens: 5, CostMicros: 100, TTFTMs: -1}
		if slices.Contains(poison, i) {
			r.ID, r.Model = fmt.Sprintf("0192f0c1-7b2a-7def-8abc-%012d", i), "poison"
			poisonIDs = append(poisonIDs, r.ID)
		}
		l.Add(&r)
	}
	stop := runLog(t, l)
	waitFor(t, "the batch settled", func() bool { st := l.Stats(); return st.Written+st.Dropped == 52 })
	stop()
	good := int64(52 - len(poison))
	if st := l.Stats(); st != (store.RequestLogStats{Added: 52, Written: good, Dropped: int64(len(poison))}) {
		t.Errorf("Stats = %+v, want %d written and %d dropped", st, good, len(poison))
	}
	var rows, poisoned, reqs, cost int64
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE id = ANY($1::uuid[])) FROM requests`, poisonIDs).Scan(&rows, &poisoned); err != nil {
		t.Fatal(err)
	}
	if rows != good || poisoned != 0 {
		t.Errorf("requests holds %d rows (%d of them refused ones), want the %d others", rows, poisoned, good)
	}
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(requests), 0)::bigint, coalesce(sum(cost_micros), 0)::bigint FROM spend_daily`).Scan(&reqs, &cost); err != nil {
		t.Fatal(err)
	}
	if reqs != good || cost != good*100 {
		t.Errorf("spend_daily sums %d requests, %d µ$; want %d and %d (the rows written)", reqs, cost, good, good*100)
	}
	// A flush logs its first maxRefusedLogged (10) refused rows one by one
	// and the rest as a count. The rows usually go in one flush; when the
	// writer happens to split them over two, each flush has its own ten.
	out := logs.String()
	one := `"msg":"request log: row refused by the database; dropped"`
	n := strings.Count(out, one)
	if ids := countContained(out, poisonIDs); ids != n {
		t.Errorf("%d refused rows logged one by one, %d of them with a refused row's id:\n%s", n, ids, out)
	}
	more := `"msg":"request log: more rows refused by the database; dropped"`
	counted := 0
	for _, m := range regexp.MustCompile(regexp.QuoteMeta(more)+`,"rows":(\d+)}`).FindAllStringSubmatch(out, -1) {
		k, _ := strconv.Atoi(m[1])
		counted += k
	}
	if n+counted != len(poison) {
		t.Errorf("%d refused rows logged one by one and %d as a count, want %d in all:\n%s", n, counted, len(poison), out)
	}
	if len(poison) <= 10 {
		if n != len(poison) || strings.Contains(out, more) {
			t.Errorf("%d refused rows: %d logged one by one (want all), a count logged: %v:\n%s", len(poison), n, strings.Contains(out, more), out)
		}
	} else if n < 10 {
		t.Errorf("%d refused rows: only %d logged one by one, want at least 10:\n%s", len(poison), n, out)
	}
}

// lossyConn is a connection to Postgres that, while armed, loses the reply to the
// commit of a transaction that COPYed into requests: the commit reaches the server
// and is done there (its reply is read), then the client sees the connection break.
type lossyConn struct {
	net.Conn
	armed          *atomic.Bool
	copied, commit bool
}

// commitMsg is a simple-protocol Query message of "commit", as pgx sends it.
var commitMsg = []byte("Q\x00\x00\x00\x0bcommit\x00")

func (c *lossyConn) Write(b []byte) (int, error) {
	if c.armed.Load() {
		if bytes.Contains(b, []byte("COPY requests")) {
			c.copied = true
		}
		if c.copied && bytes.Contains(b, commitMsg) {
			c.commit = true
		}
	}
	return c.Conn.Write(b)
}

func (c *lossyConn) Read(b []byte) (int, error) {
	if !c.commit {
		return c.Conn.Read(b)
	}
	// Wait for the server's answer to the commit: it committed. Then lose it.
	if _, err := c.Conn.Read(b); err != nil {
		return 0, err
	}
	if c.armed.CompareAndSwap(true, false) {
		c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	return 0, io.ErrUnexpectedEOF
}

// TestRequestLogRetriedCopyNeverDuplicates: the reply to a flush's commit is lost
// (the rows and their spend are in the database, the writer saw an error), so the
// writer keeps the batch and writes it again: every row is in requests once and the
// spend is counted once.
func TestRequestLogRetriedCopyNeverDuplicates(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(storetest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &lossyConn{Conn: c, armed: &armed}, nil
	}
	ctx := t.Context()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := store.New(pool, testSecretKey(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.MaintainRequests(ctx, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	l := s.NewRequestLog(store.RequestLogOptions{Batch: 50, Interval: 20 * time.Millisecond})
	armed.Store(true)
	stop := runLog(t, l)
	now := time.Now()
	for range 50 {
		r := store.RequestRow{StartedAt: now, Route: "chat", Status: 200, Model: "glm-5", UpstreamModel: "glm-5",
			KeyID: "10000000-0000-4000-8000-000000000001", ConnectionID: "33333333-3333-4333-8333-333333333333",
			Attempts: 1, InputTokens: 10, OutputTokens: 5, CostMicros: 100, TTFTMs: -1}
		l.Add(&r)
	}
	waitWritten(t, l, 50)
	stop()
	if armed.Load() {
		t.Fatal("no commit reply was lost: the test did not test a retry")
	}
	var rows, distinct, reqs, cost int64
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT id) FROM requests`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != 50 || distinct != 50 {
		t.Errorf("requests holds %d rows (%d distinct ids), want each of the 50 once", rows, distinct)
	}
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(requests), 0)::bigint, coalesce(sum(cost_micros), 0)::bigint FROM spend_daily`).Scan(&reqs, &cost); err != nil {
		t.Fatal(err)
	}
	if reqs != 50 || cost != 5000 {
		t.Errorf("spend_daily sums %d requests, %d µ$; want 50 and 5000 (each row once)", reqs, cost)
	}
	if st := l.Stats(); st != (store.RequestLogStats{Added: 50, Written: 50}) {
		t.Errorf("Stats = %+v, want 50 added and written", st)
	}
}

// countContained counts the strings of ids that occur in out.
func countContained(out string, ids []string) int {
	n := 0
	for _, id := range ids {
		if strings.Contains(out, id) {
			n++
		}
	}
	return n
}
