package store

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/requestlog"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// RequestRow is one row of the request log (package requestlog: the gateway's
// record, written as it is). Empty strings are stored as NULL; TTFTMs < 0 means no
// byte was relayed (NULL). ID is set by the writer (a UUIDv7 of StartedAt) and by
// reads.
type RequestRow = requestlog.Row

// RequestAttempt is one upstream attempt of a request (package requestlog).
type RequestAttempt = requestlog.Attempt

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
	// maintainRetry is how soon maintenance that failed (a lock not granted in
	// maintainLockTimeout, the database away) is tried again.
	maintainRetry = time.Minute
	// maintainLockTimeout bounds each wait of partition DDL for its locks: a
	// reader holding requests makes it give up (and retry later) rather than
	// queue every writer and reader behind it.
	maintainLockTimeout = time.Second
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
// every Interval or Batch rows and flushes what is left when its context ends. Its
// partitions (made ahead, dropped past retention) are kept by a goroutine of their
// own whose DDL waits for a lock at most maintainLockTimeout, so a long reader of
// requests delays maintenance, never writing. While the database is away, the
// rows of the failed flush are kept and retried, new rows fill the buffer, and what
// does not fit is dropped and counted: written + dropped = added, exactly. A row
// the database refuses is found by halving its batch and dropped alone.
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
	// between flushes only when rows are kept for the next one: a flush that
	// failed, or rows whose day's partition is being made.
	back []RequestRow
	// ids are back's row ids, made once when a row joins back, so that a batch
	// written again after an unknown outcome carries the ids it had.
	ids [][16]byte
	// ambiguous says that some of back may have been committed already (a
	// flush failed without saying whether its commit happened): it is written
	// through a staging table, skipping the ids that are there.
	ambiguous bool
	// scratch is the writer's reused space for a flush (writer goroutine only).
	scratch requestScratch

	// wantMu guards want and refusedDays: the days the writer met without a
	// partition, asked of the maintenance goroutine, and the days it could not
	// make (a date Postgres refuses), whose rows are dropped.
	wantMu      sync.Mutex
	want        map[time.Time]bool
	refusedDays map[time.Time]bool
	wantKick    chan struct{}
	// maintainRetry is how soon failed maintenance is tried again.
	maintainRetry time.Duration

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
		front:         make([]RequestRow, 0, opts.Batch),
		back:          make([]RequestRow, 0, opts.Batch),
		ids:           make([][16]byte, 0, opts.Batch),
		kick:          make(chan struct{}, 1),
		want:          map[time.Time]bool{},
		refusedDays:   map[time.Time]bool{},
		wantKick:      make(chan struct{}, 1),
		maintainRetry: maintainRetry,
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
// and counted). Partition maintenance runs beside it (maintainLoop) until ctx ends.
func (l *RequestLog) Run(ctx context.Context) {
	var maint sync.WaitGroup
	maint.Go(func() { l.maintainLoop(ctx) })
	defer maint.Wait()
	tick := time.NewTicker(l.opts.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			l.stop(ctx)
			return
		case <-l.kick:
		case <-tick.C:
		}
		l.flush(ctx)
	}
}

// stop closes the buffer and writes what is left: the rows kept by a failed flush
// and the buffer's rows.
func (l *RequestLog) stop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestLogFlushTimeout)
	defer cancel()
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.flush(ctx)
	// Rows waiting for a partition get it here: the maintenance goroutine has
	// stopped with ctx.
	l.makeWanted(ctx)
	l.flush(ctx)
	l.flush(ctx)
	// Whatever the database did not take by now is lost.
	l.dropped.Add(int64(len(l.back)))
	l.back, l.ids = l.back[:0], l.ids[:0]
	l.mu.Lock()
	l.dropped.Add(int64(len(l.front)))
	l.front = l.front[:0]
	l.mu.Unlock()
}

// take moves the buffer's rows into back: a swap when back is empty, else as many
// as fit beside the kept rows (back holds Buffer rows at most), so that rows kept
// for a missing partition never hold up the others. Each new row gets its id.
func (l *RequestLog) take() {
	l.mu.Lock()
	if len(l.back) == 0 {
		l.front, l.back = l.back, l.front
		l.ids = l.ids[:0]
	} else if n := min(l.opts.Buffer-len(l.back), len(l.front)); n > 0 {
		l.back = append(l.back, l.front[:n]...)
		rest := copy(l.front, l.front[n:])
		clear(l.front[rest:])
		l.front = l.front[:rest]
	}
	l.mu.Unlock()
	for i := len(l.ids); i < len(l.back); i++ {
		id, ok := parseUUID(l.back[i].ID)
		if !ok {
			id = newRequestUUID(l.back[i].StartedAt)
		}
		l.ids = append(l.ids, id)
	}
}

// flush writes back (after taking the buffer's rows into it). Rows whose day has
// no partition yet wait for it; the others are written in one transaction. A batch
// that fails because the database is away is kept for the next flush; one the
// database refuses is halved until the rows it refuses are alone, and those are
// dropped, counted and logged.
func (l *RequestLog) flush(ctx context.Context) {
	l.take()
	if len(l.back) == 0 {
		return
	}
	ready, err := l.partitioned(ctx)
	if err != nil {
		l.s.logger.Warn("request log: database unavailable; rows are kept in memory and dropped when the buffer is full",
			slog.Int("rows", len(l.back)), slog.Any("error", err))
		return
	}
	kept := l.writeReady(ctx, ready)
	// back[:kept] failed for want of the database; back[ready:] wait for their
	// partitions: both are kept, in that order.
	n := kept + copy(l.back[kept:], l.back[ready:])
	copy(l.ids[kept:], l.ids[ready:])
	clear(l.back[n:])
	l.back, l.ids = l.back[:n], l.ids[:n]
	if n == 0 {
		l.ambiguous = false
		if cap(l.back) > 2*l.opts.Batch {
			// Grown while the database was away: back to a batch's size.
			l.back = make([]RequestRow, 0, l.opts.Batch)
			l.ids = make([][16]byte, 0, l.opts.Batch)
		}
	}
}

// writeReady writes back[:ready], halving a part the database refuses down to
// single rows, which are dropped. It moves the rows left unwritten (the database
// away) to the front of back and returns their number.
func (l *RequestLog) writeReady(ctx context.Context, ready int) (kept int) {
	type span struct{ lo, hi int }
	todo := []span{{0, ready}} // a stack; the lowest span is on top
	refusedRows := 0
	defer func() {
		if refusedRows > maxRefusedLogged {
			l.s.logger.Error("request log: more rows refused by the database; dropped",
				slog.Int("rows", refusedRows-maxRefusedLogged))
		}
	}()
	for len(todo) > 0 {
		sp := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if sp.lo == sp.hi {
			continue
		}
		err := l.write(ctx, sp.lo, sp.hi)
		switch {
		case err == nil:
			l.written.Add(int64(sp.hi - sp.lo))
			continue
		case !refused(err):
			// Unknown outcome: this span and every one not tried yet are kept,
			// and may have been committed.
			l.ambiguous = true
			l.s.logger.Warn("request log: database unavailable; rows are kept in memory and dropped when the buffer is full",
				slog.Int("rows", ready-sp.lo), slog.Any("error", err))
			todo = append(todo, sp)
			for i := len(todo) - 1; i >= 0; i-- {
				s := todo[i]
				kept += copy(l.back[kept:], l.back[s.lo:s.hi])
				copy(l.ids[kept-(s.hi-s.lo):], l.ids[s.lo:s.hi])
			}
			return kept
		case sp.hi-sp.lo == 1:
			l.dropped.Add(1)
			if refusedRows++; refusedRows <= maxRefusedLogged {
				r := &l.back[sp.lo]
				l.s.logger.Error("request log: row refused by the database; dropped",
					slog.String("request_id", pgtype.UUID{Bytes: l.ids[sp.lo], Valid: true}.String()),
					slog.Time("started_at", r.StartedAt), slog.String("key", r.KeyName), slog.Int("status", r.Status),
					slog.Any("error", err))
			}
		default:
			mid := (sp.lo + sp.hi) / 2
			todo = append(todo, span{mid, sp.hi}, span{sp.lo, mid})
		}
	}
	return 0
}

// refused reports whether err is the database refusing the rows (a constraint, a
// value out of range) rather than failing to answer: an error from Postgres outside
// the classes of a connection lost, a transaction to retry, resources, a lock not
// granted, a statement cancelled, or the server shutting down.
func refused(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || unreachable(err) {
		return false
	}
	switch pgErr.Code[:2] {
	case "08", "40", "53", "57", "58":
		return false
	}
	return pgErr.Code != "55P03" && pgErr.Code != "55006"
}

// write COPYs back[lo:hi] (see WriteRequests), encoded into the writer's own buffer.
func (l *RequestLog) write(ctx context.Context, lo, hi int) error {
	ctx, cancel := context.WithTimeout(ctx, requestLogFlushTimeout)
	defer cancel()
	err := l.s.writeRequests(ctx, l.back[lo:hi], l.ids[lo:hi], l.ambiguous, &l.scratch)
	if cap(l.scratch.enc) > maxKeptEncoding {
		l.scratch.enc = nil // a batch retried after an outage; the usual one is far smaller
	}
	return err
}

// maxRefusedLogged is how many refused rows a flush logs one by one; the rest
// are logged as a count (a schema that refuses every row must not flood the log).
const maxRefusedLogged = 10

// maxKeptEncoding bounds the COPY buffer the writer keeps between flushes.
const maxKeptEncoding = 1 << 20
