package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// The request log's day partitions are named requests_pYYYYMMDD and hold the rows
// whose started_at falls in that UTC day.

// partitionsAhead is how many days after today get their partition in advance.
const partitionsAhead = 2

// requestPartitionLockKey serialises partition maintenance across replicas (the
// bytes of "gh:rqprt"): concurrent CREATE … PARTITION OF of one name can fail.
const requestPartitionLockKey int64 = 0x67683a72717072

const (
	lockRequestPartitionsSQL = `SELECT pg_advisory_xact_lock($1)`
	listRequestPartitionsSQL = `
SELECT c.relname FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_class p ON p.oid = i.inhparent
WHERE p.relname = 'requests' AND p.relnamespace = to_regnamespace(current_schema())::oid
ORDER BY c.relname`
)

// partitionName is the partition of the UTC day containing day.
func partitionName(day time.Time) string { return "requests_p" + utcDay(day).Format("20060102") }

// ensureRequestPartitions makes the partitions of the UTC days from first to last
// (inclusive) that do not exist yet, in one transaction.
func (s *Store) ensureRequestPartitions(ctx context.Context, first, last time.Time) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
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
	return nil
}

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
		if _, err := s.pool.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{name}.Sanitize()); err != nil {
			return dropped, fmt.Errorf("store: drop request log partition %s: %w", name, translate(err))
		}
		dropped = append(dropped, name)
		// A row that still names the day must make its partition again.
		s.parts.Delete(day)
	}
	return dropped, nil
}

// maintain runs MaintainRequests on the log's clock and logs what it did; a failure
// is logged and tried again at the next hour.
func (l *RequestLog) maintain(ctx context.Context) {
	dropped, err := l.s.MaintainRequests(ctx, l.opts.Now(), l.opts.Retention)
	for _, name := range dropped {
		l.s.logger.Info("request log: partition past retention dropped", slog.String("partition", name))
	}
	if err != nil && ctx.Err() == nil {
		l.s.logger.Warn("request log: partition maintenance failed", slog.Any("error", err))
	}
}
