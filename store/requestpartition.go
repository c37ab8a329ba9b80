package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// The request log's day partitions are named requests_pYYYYMMDD and hold the rows
// whose started_at falls in that UTC day.

// partitionsAhead is how many days after today get their partition in advance.
const partitionsAhead = 2

// requestPartitionLockKey serialises partition maintenance across replicas (the
// bytes of "gh:rqprt"): concurrent CREATE … PARTITION OF of one name can fail.
const requestPartitionLockKey int64 = 0x67683a72717072

const (
	// lockTimeoutSQL bounds the lock waits of the transaction it runs in.
	lockTimeoutSQL           = `SELECT set_config('lock_timeout', $1, true)`
	lockRequestPartitionsSQL = `SELECT pg_advisory_xact_lock($1)`
	// requestPartitionExistsSQL looks a partition up by name in the catalog only:
	// it takes no lock on requests, so the writer can ask while DDL waits.
	requestPartitionExistsSQL = `SELECT to_regclass($1) IS NOT NULL`
	listRequestPartitionsSQL  = `
SELECT c.relname FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_class p ON p.oid = i.inhparent
WHERE p.relname = 'requests' AND p.relnamespace = to_regnamespace(current_schema())::oid
ORDER BY c.relname`
)

// partitionName is the partition of the UTC day containing day.
func partitionName(day time.Time) string { return "requests_p" + utcDay(day).Format("20060102") }

// ensureRequestPartitions makes the partitions of the UTC days from first to last
// (inclusive) that do not exist yet, in one transaction whose lock waits are bounded
// by maintainLockTimeout, and records them as known.
func (s *Store) ensureRequestPartitions(ctx context.Context, first, last time.Time) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockTimeoutSQL, lockTimeout(maintainLockTimeout)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, lockRequestPartitionsSQL, requestPartitionLockKey); err != nil {
			return err
		}
		for d := utcDay(first); !d.After(utcDay(last)); d = d.AddDate(0, 0, 1) {
			// Bounds written in UTC with their offset: a bare date would be read
			// in the session's time zone.
			sql := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF requests FOR VALUES FROM ('%s') TO ('%s')`,
				pgx.Identifier{partitionName(d)}.Sanitize(), d.Format("2006-01-02 15:04:05Z07:00"),
				d.AddDate(0, 0, 1).Format("2006-01-02 15:04:05Z07:00"))
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: request log partitions: %w", translate(err))
	}
	for d := utcDay(first); !d.After(utcDay(last)); d = d.AddDate(0, 0, 1) {
		s.parts.Store(d, true)
	}
	return nil
}

// lockTimeout is d as a lock_timeout setting, in milliseconds.
func lockTimeout(d time.Duration) string { return fmt.Sprint(d.Milliseconds(), "ms") }

// RequestPartitions lists the request log's partitions by name, oldest first.
func (s *Store) RequestPartitions(ctx context.Context) ([]string, error) {
	rows, _ := s.db.Query(ctx, listRequestPartitionsSQL)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: request log partitions: %w", translate(err))
	}
	return names, nil
}

// MaintainRequests makes the request log's partitions from now's UTC day to
// partitionsAhead days after it, and drops every partition whose day ended before
// now − retention (retention ≤ 0: none is dropped). It returns the names dropped.
func (s *Store) MaintainRequests(ctx context.Context, now time.Time, retention time.Duration) (dropped []string, err error) {
	today := utcDay(now)
	if err := s.ensureRequestPartitions(ctx, today, today.AddDate(0, 0, partitionsAhead)); err != nil {
		return nil, err
	}
	if retention <= 0 {
		return nil, nil
	}
	names, err := s.RequestPartitions(ctx)
	if err != nil {
		return nil, err
	}
	cutoff := now.Add(-retention)
	for _, name := range names {
		if len(name) != len("requests_p20060102") {
			continue // not one of ours
		}
		day, err := time.Parse("20060102", name[len("requests_p"):])
		if err != nil {
			continue
		}
		if day.AddDate(0, 0, 1).After(cutoff) {
			continue
		}
		// The drop waits for its locks at most maintainLockTimeout: a reader of
		// requests makes it fail (and be tried again), never queue the writer.
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lockTimeoutSQL, lockTimeout(maintainLockTimeout)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{name}.Sanitize())
			return err
		})
		if err != nil {
			return dropped, fmt.Errorf("store: drop request log partition %s: %w", name, translate(err))
		}
		dropped = append(dropped, name)
		// A row that still names the day must make its partition again.
		s.parts.Delete(day)
	}
	return dropped, nil
}

// maintainLoop keeps the log's partitions until ctx ends: at once, then hourly
// (MaintainRequests on the log's clock), sooner after a failure (maintainRetry), and
// whenever the writer asks for a day it met without a partition.
func (l *RequestLog) maintainLoop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			next := maintainEvery
			if !l.maintain(ctx) {
				next = l.maintainRetry
			}
			timer.Reset(next)
		case <-l.wantKick:
			if !l.makeWanted(ctx) {
				timer.Reset(min(l.maintainRetry, maintainEvery))
			}
		}
	}
}

// maintain runs MaintainRequests and makes the days the writer asked for, logging
// what it did; it reports whether all of it succeeded.
func (l *RequestLog) maintain(ctx context.Context) bool {
	dropped, err := l.s.MaintainRequests(ctx, l.opts.Now(), l.opts.Retention)
	for _, name := range dropped {
		l.s.logger.Info("request log: partition past retention dropped", slog.String("partition", name))
	}
	if err != nil && ctx.Err() == nil {
		l.s.logger.Warn("request log: partition maintenance failed; tried again later", slog.Any("error", err))
	}
	ok := l.makeWanted(ctx)
	if err == nil {
		l.wake()
	}
	return err == nil && ok
}

// makeWanted makes the partitions of the days the writer asked for. A day
// Postgres refuses (a date out of its range) is recorded as refused, so that its
// rows are dropped; one that fails otherwise stays asked for. It reports whether
// every day was settled.
func (l *RequestLog) makeWanted(ctx context.Context) bool {
	l.wantMu.Lock()
	days := make([]time.Time, 0, len(l.want))
	for d := range l.want {
		days = append(days, d)
	}
	l.wantMu.Unlock()
	ok := true
	for _, d := range days {
		err := l.s.ensureRequestPartitions(ctx, d, d)
		l.wantMu.Lock()
		switch {
		case err == nil:
			delete(l.want, d)
		case refused(err):
			delete(l.want, d)
			l.refusedDays[d] = true
		default:
			ok = false
		}
		l.wantMu.Unlock()
		if err != nil && ctx.Err() == nil {
			l.s.logger.Warn("request log: partition not made", slog.Time("day", d), slog.Any("error", err))
		}
	}
	if len(days) > 0 {
		l.wake()
	}
	return ok
}

// wake starts a flush of the writer.
func (l *RequestLog) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// partitioned puts the rows of back whose day has its partition first, and
// returns their number; rows of a day without one follow (kept until the
// maintenance goroutine, asked for the day, has made it), and rows of a day it
// could not make are dropped, counted and logged. A day unknown to this process is
// looked up in the catalog, which never waits for a lock on requests.
func (l *RequestLog) partitioned(ctx context.Context) (ready int, err error) {
	var dayStart, dayEnd int64 // the last day known to have its partition, Unix µs
	asked := false
	n := len(l.back)
	for i := 0; i < n; {
		r := &l.back[i]
		if us := r.StartedAt.UnixMicro(); us >= dayStart && us < dayEnd {
			l.back[ready], l.back[i] = l.back[i], l.back[ready]
			l.ids[ready], l.ids[i] = l.ids[i], l.ids[ready]
			ready++
			i++
			continue
		}
		day := utcDay(r.StartedAt)
		known, err := l.s.partitionKnown(ctx, day)
		if err != nil {
			return 0, err
		}
		if known {
			dayStart, dayEnd = day.UnixMicro(), day.AddDate(0, 0, 1).UnixMicro()
			continue // placed by the branch above
		}
		l.wantMu.Lock()
		bad := l.refusedDays[day]
		if !bad && !l.want[day] {
			l.want[day] = true
			asked = true
		}
		l.wantMu.Unlock()
		if !bad {
			i++
			continue
		}
		l.dropped.Add(1)
		l.s.logger.Error("request log: row refused by the database (no partition for its day); dropped",
			slog.String("request_id", pgtype.UUID{Bytes: l.ids[i], Valid: true}.String()),
			slog.Time("started_at", r.StartedAt), slog.String("key", r.KeyName), slog.Int("status", r.Status))
		n--
		l.back[i], l.back[n] = l.back[n], RequestRow{}
		l.ids[i] = l.ids[n]
	}
	l.back, l.ids = l.back[:n], l.ids[:n]
	if asked {
		select {
		case l.wantKick <- struct{}{}:
		default:
		}
	}
	return ready, nil
}

// partitionKnown reports whether day's partition exists, from what this process
// made or saw, else from the catalog.
func (s *Store) partitionKnown(ctx context.Context, day time.Time) (bool, error) {
	if _, ok := s.parts.Load(day); ok {
		return true, nil
	}
	var ok bool
	if err := s.pool.QueryRow(ctx, requestPartitionExistsSQL, partitionName(day)).Scan(&ok); err != nil {
		return false, fmt.Errorf("store: request log partition %s: %w", partitionName(day), translate(err))
	}
	if ok {
		s.parts.Store(day, true)
	}
	return ok, nil
}
