package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// RequestRow is one row of the request log: one gateway request, admitted or not,
// served or failed. Empty strings are stored as NULL; TTFTMs < 0 means no byte was
// relayed (NULL). ID is set by the writer (a UUIDv7 of StartedAt) and by reads.
type RequestRow struct {
	ID             string
	StartedAt      time.Time
	KeyID          string
	KeyName        string
	ConnectionID   string
	ConnectionName string
	Provider       string
	Model          string
	UpstreamModel  string
	Route          string
	Stream         bool
	Status         int
	Code           string
	Gate           string
	Priority       string
	Attempts       int
	QueueMs        int
	TTFTMs         int
	UpstreamMs     int
	TotalMs        int
	// InputTokens is every prompt token processed; CachedTokens the part read
	// from the prompt cache, CacheWriteTokens the part written to it.
	InputTokens      int64
	OutputTokens     int64
	CachedTokens     int64
	CacheWriteTokens int64
	CostMicros       int64
	TraceID          string
	Replica          string
}

// Request log defaults (DESIGN "Request log and usage").
const (
	DefaultRequestLogBuffer    = 8192
	DefaultRequestLogBatch     = 1000
	DefaultRequestLogInterval  = time.Second
	DefaultRequestLogRetention = 7 * 24 * time.Hour
	// requestLogFlushTimeout bounds one COPY, so that a database that hangs
	// holds the writer (and so the buffer) for no longer than this.
	requestLogFlushTimeout = 5 * time.Second
	// maintainEvery is how often partitions are made ahead and dropped past retention.
	maintainEvery = time.Hour
)

// RequestLogOptions configures a RequestLog; zero values take the defaults above.
type RequestLogOptions struct {
	// Buffer is how many rows wait for the writer at most; a row that finds it
	// full is dropped and counted. While a flush fails, the rows it holds wait
	// beside the buffer (so up to 2 × Buffer rows are held).
	Buffer int
	// Batch is the number of buffered rows that starts a flush before Interval.
	Batch int
	// Interval is how often the buffer is flushed at least.
	Interval time.Duration
	// Retention is how long rows are kept: day partitions that ended before
	// now − Retention are dropped hourly.
	Retention time.Duration
	// Now is the clock of partition maintenance (default time.Now).
	Now func() time.Time
}

// RequestLog writes request rows off the request path: Add copies a row into a
// bounded buffer and never waits for the database; Run flushes the buffer with COPY
// every Interval or Batch rows, keeps the day partitions (ahead and past retention)
// and flushes what is left when its context ends. While the database is away, the
// rows of the failed flush are kept and retried, new rows fill the buffer, and what
// does not fit is dropped and counted: written + dropped = added, exactly.
type RequestLog struct {
	s    *Store
	opts RequestLogOptions

	mu sync.Mutex
	// front is filled by Add and swapped with back by the writer. Both are a
	// batch's size while the database keeps up and grow (to Buffer rows at
	// most) only while it does not: 2 × 8192 rows held from the start were
	// half the live heap, which the GC scanned and GOGC multiplied into RSS.
	front  []RequestRow
	closed bool
	kick   chan struct{}

	// back is the batch being written (writer goroutine only); non-empty
	// between flushes only when the last flush failed and will be retried.
	back []RequestRow
	// scratch is the writer's reused space for a flush (writer goroutine only).
	scratch requestScratch

	added, written, dropped atomic.Int64
}

// NewRequestLog returns a RequestLog writing to s's database. Call Run to start it.
func (s *Store) NewRequestLog(opts RequestLogOptions) *RequestLog {
	opts.Buffer = cmp.Or(max(opts.Buffer, 0), DefaultRequestLogBuffer)
	opts.Batch = min(cmp.Or(max(opts.Batch, 0), DefaultRequestLogBatch), opts.Buffer)
	opts.Interval = cmp.Or(max(opts.Interval, 0), DefaultRequestLogInterval)
	opts.Retention = cmp.Or(max(opts.Retention, 0), DefaultRequestLogRetention)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &RequestLog{
		s: s, opts: opts,
		front: make([]RequestRow, 0, opts.Batch),
		back:  make([]RequestRow, 0, opts.Batch),
		kick:  make(chan struct{}, 1),
	}
}

// Add copies r into the buffer and reports whether it was kept: false when the
// buffer is full or the log has stopped (the row is counted as dropped). It never
// blocks on the database; it allocates only while the buffer grows past a batch
// (the database slow or away).
func (l *RequestLog) Add(r *RequestRow) bool {
	l.added.Add(1)
	l.mu.Lock()
	if l.closed || len(l.front) >= l.opts.Buffer {
		l.mu.Unlock()
		l.dropped.Add(1)
		return false
	}
	l.front = append(l.front, *r)
	n := len(l.front)
	l.mu.Unlock()
	if n == l.opts.Batch {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// RequestLogStats counts a RequestLog's rows: added (every Add), written (committed
// by COPY) and dropped (buffer full, log stopped, or refused by the database).
type RequestLogStats struct {
	Added, Written, Dropped int64
}

// Stats returns the log's counters.
func (l *RequestLog) Stats() RequestLogStats {
	return RequestLogStats{Added: l.added.Load(), Written: l.written.Load(), Dropped: l.dropped.Load()}
}

// Run writes the buffer until ctx ends, then stops taking rows and flushes what it
// holds (bounded by requestLogFlushTimeout; what cannot be written then is dropped
// and counted). It makes the partitions at once and then hourly.
func (l *RequestLog) Run(ctx context.Context) {
	l.maintain(ctx)
	tick := time.NewTicker(l.opts.Interval)
	defer tick.Stop()
	maint := time.NewTicker(maintainEvery)
	defer maint.Stop()
	for {
		select {
		case <-ctx.Done():
			l.stop(ctx)
			return
		case <-maint.C:
			l.maintain(ctx)
			continue
		case <-l.kick:
		case <-tick.C:
		}
		l.flush(ctx)
	}
}

// stop closes the buffer and writes what is left: the batch of a failed flush and
// the buffer's rows.
func (l *RequestLog) stop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestLogFlushTimeout)
	defer cancel()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.flush(ctx)
	l.flush(ctx)
	// Whatever the database did not take by now is lost.
	l.dropped.Add(int64(len(l.back)))
	l.back = l.back[:0]
	l.mu.Lock()
	l.dropped.Add(int64(len(l.front)))
	l.front = l.front[:0]
	l.mu.Unlock()
}

// flush writes the batch of a failed flush if there is one, else swaps the buffer
// in and writes it. A batch that fails because the database is away is kept for the
// next flush; one the database refuses is dropped, counted and logged.
func (l *RequestLog) flush(ctx context.Context) {
	if len(l.back) == 0 {
		l.mu.Lock()
		l.front, l.back = l.back, l.front
		l.mu.Unlock()
	}
	if len(l.back) == 0 {
		return
	}
	err := l.write(ctx)
	switch {
	case err == nil:
		l.written.Add(int64(len(l.back)))
	case errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		// Kept for the next flush (or stop's, when ctx has ended).
		l.s.logger.Warn("request log: database unavailable; rows are kept in memory and dropped when the buffer is full",
			slog.Int("rows", len(l.back)), slog.Any("error", err))
		return
	default:
		l.s.logger.Error("request log: rows refused by the database; dropped",
			slog.Int("rows", len(l.back)), slog.Any("error", err))
		l.dropped.Add(int64(len(l.back)))
	}
	clear(l.back)
	l.back = l.back[:0]
	if cap(l.back) > 2*l.opts.Batch {
		// Grown while the database was away: back to a batch's size.
		l.back = make([]RequestRow, 0, l.opts.Batch)
	}
}

// write COPYs l.back (see WriteRequests), encoded into the writer's own buffer.
func (l *RequestLog) write(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, requestLogFlushTimeout)
	defer cancel()
	err := l.s.writeRequests(ctx, l.back, &l.scratch)
	if cap(l.scratch.enc) > maxKeptEncoding {
		l.scratch.enc = nil // a batch retried after an outage; the usual one is far smaller
	}
	return err
}

// maxKeptEncoding bounds the COPY buffer the writer keeps between flushes.
const maxKeptEncoding = 1 << 20

// WriteRequests writes rows with one COPY (all or nothing), after making sure the
// partitions of their days exist. A row without an ID gets a UUIDv7 of its
// StartedAt (set in rows). Text is cleaned and cut to its column's bound.
func (s *Store) WriteRequests(ctx context.Context, rows []RequestRow) error {
	for i := range rows {
		if rows[i].ID == "" {
			id := newRequestUUID(rows[i].StartedAt)
			rows[i].ID = pgtype.UUID{Bytes: id, Valid: true}.String()
		}
	}
	return s.writeRequests(ctx, rows, &requestScratch{})
}

// requestScratch is what a flush reuses: the COPY's encoding and the spend sums.
type requestScratch struct {
	enc  []byte
	sums spendSums
}

// writeRequests is WriteRequests working in sc; a row without an ID gets one in
// the COPY only.
func (s *Store) writeRequests(ctx context.Context, rows []RequestRow, sc *requestScratch) error {
	var dayStart, dayEnd int64 // the last day known to have its partition, Unix µs
	for i := range rows {
		t := rows[i].StartedAt
		if us := t.UnixMicro(); us >= dayStart && us < dayEnd {
			continue
		}
		day := utcDay(t)
		if _, ok := s.parts.Load(day); !ok {
			if err := s.ensureRequestPartitions(ctx, day, day); err != nil {
				return err
			}
			s.parts.Store(day, true)
		}
		dayStart, dayEnd = day.UnixMicro(), day.AddDate(0, 0, 1).UnixMicro()
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := copyRequests(ctx, tx, rows, &sc.enc); err != nil {
			return err
		}
		return addSpend(ctx, tx, rows, &sc.sums)
	})
	if err != nil {
		return fmt.Errorf("store: write request log: %w", translate(err))
	}
	return nil
}

// cleanText makes s storable: valid UTF-8 without NUL bytes (which Postgres text
// refuses, and a client's model name may carry), at most max bytes.
func cleanText(s string, max int) string {
	if len(s) > max {
		s = s[:max]
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	return strings.ToValidUTF8(s, "")
}

func clampMs(ms int) int32 { return int32(min(max(ms, 0), 1<<31-1)) }
