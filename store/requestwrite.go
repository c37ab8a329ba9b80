package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// WriteRequests writes rows with one COPY (all or nothing), after making sure the
// partitions of their days exist. A row without an ID gets a UUIDv7 of its
// StartedAt (set in rows). Text is cleaned and cut to its column's bound.
func (s *Store) WriteRequests(ctx context.Context, rows []RequestRow) error {
	ids := make([][16]byte, len(rows))
	for i := range rows {
		if rows[i].ID == "" {
			id := newRequestUUID(rows[i].StartedAt)
			rows[i].ID = pgtype.UUID{Bytes: id, Valid: true}.String()
		}
		ids[i], _ = parseUUID(rows[i].ID)
	}
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
		}
		dayStart, dayEnd = day.UnixMicro(), day.AddDate(0, 0, 1).UnixMicro()
	}
	return s.writeRequests(ctx, rows, ids, false, &requestScratch{})
}

// requestScratch is what a flush reuses: the COPY's encoding and the spend sums.
type requestScratch struct {
	enc  []byte
	sums spendSums
}

const (
	// createRequestStageSQL makes the staging table of a batch written again
	// after an unknown outcome; it goes with the transaction.
	createRequestStageSQL = `CREATE TEMP TABLE requests_stage (LIKE requests INCLUDING DEFAULTS) ON COMMIT DROP`
	// insertRequestStageSQL moves the staged rows that are not in requests yet
	// and returns their ids.
	insertRequestStageSQL = `INSERT INTO requests SELECT * FROM requests_stage ON CONFLICT (started_at, id) DO NOTHING RETURNING id`
)

// copyRequestsStageSQL is copyRequestsSQL into the staging table.
var copyRequestsStageSQL = strings.Replace(copyRequestsSQL, "COPY requests ", "COPY requests_stage ", 1)

// writeRequests writes rows (with ids, in step) and adds their spend, in one
// transaction. ambiguous says that some of them may be in the table already: they
// are then staged, and only the rows really inserted are added and summed, so a
// batch written again after an unknown outcome never counts a row twice.
func (s *Store) writeRequests(ctx context.Context, rows []RequestRow, ids [][16]byte, ambiguous bool, sc *requestScratch) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if !ambiguous {
			if err := copyRequests(ctx, tx, copyRequestsSQL, rows, ids, &sc.enc); err != nil {
				return err
			}
			return addSpend(ctx, tx, rows, &sc.sums)
		}
		if _, err := tx.Exec(ctx, createRequestStageSQL); err != nil {
			return err
		}
		if err := copyRequests(ctx, tx, copyRequestsStageSQL, rows, ids, &sc.enc); err != nil {
			return err
		}
		res, _ := tx.Query(ctx, insertRequestStageSQL)
		inserted := map[[16]byte]bool{}
		for res.Next() {
			if v := res.RawValues(); len(v) == 1 && len(v[0]) == 16 {
				inserted[[16]byte(v[0])] = true
			}
		}
		if err := res.Err(); err != nil {
			return err
		}
		fresh := make([]RequestRow, 0, len(inserted))
		for i := range rows {
			if inserted[ids[i]] {
				fresh = append(fresh, rows[i])
			}
		}
		return addSpend(ctx, tx, fresh, &sc.sums)
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
