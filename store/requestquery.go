package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequestFilter selects request log rows. Zero fields select everything.
type RequestFilter struct {
	// Key and Connection are an id (uuid) or a name.
	Key, Connection string
	Model           string // as the client sent it, or the upstream id
	// Status is an exact status (429) or a class (4 for 4xx); 0 = any.
	Status      int
	StatusClass int
	Code        string
	// Session is a session hash (16 hex digits).
	Session string
	Since   time.Time // inclusive
	Until   time.Time // exclusive
	// After continues a listing after this row (keyset: newest first).
	After *RequestCursor
	Limit int // default 50, at most 1000
}

// RequestCursor is the place of a row in the log's order (started_at, id).
type RequestCursor struct {
	StartedAt time.Time
	ID        string
}

const selectRequestColumns = `SELECT id::text, started_at, coalesce(key_id::text, ''), coalesce(key_name, ''),
coalesce(connection_id::text, ''), coalesce(connection_name, ''), coalesce(provider, ''), coalesce(model, ''),
coalesce(upstream_model, ''), route, stream, status, coalesce(code, ''), coalesce(gate, ''), coalesce(priority, ''),
attempts, queue_ms, coalesce(ttft_ms, -1), upstream_ms, total_ms, input_tokens, output_tokens, cached_tokens,
cache_write_tokens, cost_micros, coalesce(trace_id, ''), coalesce(replica, ''), coalesce(session, ''), coalesce(affinity, ''),
attempts_detail::text, coalesce(upstream_error, '') FROM requests`

func scanRequest(row pgx.CollectableRow) (RequestRow, error) {
	var r RequestRow
	var attempts []byte
	err := row.Scan(&r.ID, &r.StartedAt, &r.KeyID, &r.KeyName, &r.ConnectionID, &r.ConnectionName, &r.Provider,
		&r.Model, &r.UpstreamModel, &r.Route, &r.Stream, &r.Status, &r.Code, &r.Gate, &r.Priority, &r.Attempts,
		&r.QueueMs, &r.TTFTMs, &r.UpstreamMs, &r.TotalMs, &r.InputTokens, &r.OutputTokens, &r.CachedTokens,
		&r.CacheWriteTokens, &r.CostMicros, &r.TraceID, &r.Replica, &r.Session, &r.Affinity, &attempts, &r.UpstreamError)
	r.StartedAt = r.StartedAt.UTC()
	if err == nil && len(attempts) > 0 {
		err = json.Unmarshal(attempts, &r.AttemptsDetail)
	}
	return r, err
}

// MaxRequestPage bounds a page of ListRequests.
const MaxRequestPage = 1000

// ListRequests returns the rows f selects, newest first, and the cursor of the next
// page (nil on the last page).
func (s *Store) ListRequests(ctx context.Context, f RequestFilter) ([]RequestRow, *RequestCursor, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, MaxRequestPage)
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	idOrName := func(v, idCol, nameCol string) {
		if v == "" {
			return
		}
		if isUUID(v) {
			where = append(where, idCol+" = "+arg(v))
		} else {
			where = append(where, nameCol+" = "+arg(v))
		}
	}
	idOrName(f.Key, "key_id", "key_name")
	idOrName(f.Connection, "connection_id", "connection_name")
	if f.Model != "" {
		p := arg(f.Model)
		where = append(where, "(model = "+p+" OR upstream_model = "+p+")")
	}
	if f.Status != 0 {
		where = append(where, "status = "+arg(f.Status))
	}
	if f.StatusClass != 0 {
		where = append(where, "status >= "+arg(f.StatusClass*100)+" AND status < "+arg(f.StatusClass*100+100))
	}
	if f.Code != "" {
		where = append(where, "code = "+arg(f.Code))
	}
	if f.Session != "" {
		where = append(where, "session = "+arg(f.Session))
	}
	if !f.Since.IsZero() {
		where = append(where, "started_at >= "+arg(f.Since))
	}
	if !f.Until.IsZero() {
		where = append(where, "started_at < "+arg(f.Until))
	}
	if c := f.After; c != nil {
		if !isUUID(c.ID) {
			return nil, nil, fmt.Errorf("store: list requests: %w: malformed cursor", ErrInvalid)
		}
		// started_at <= bounds the index scan; the row comparison breaks ties.
		t := arg(c.StartedAt)
		where = append(where, "started_at <= "+t+" AND (started_at, id) < ("+t+", "+arg(c.ID)+"::uuid)")
	}
	q := selectRequestColumns
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY started_at DESC, id DESC LIMIT " + arg(limit+1)
	rows, _ := s.db.Query(ctx, q, args...)
	out, err := pgx.CollectRows(rows, scanRequest)
	if err != nil {
		return nil, nil, fmt.Errorf("store: list requests: %w", translate(err))
	}
	var next *RequestCursor
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		next = &RequestCursor{StartedAt: last.StartedAt, ID: last.ID}
	}
	return out, next, nil
}

// GetRequest returns the row id; ErrNotFound if there is none. A UUIDv7 id names
// its millisecond, which the primary key (started_at, id) finds at once; an id
// written with another time is looked for in its day, and any other id everywhere.
func (s *Store) GetRequest(ctx context.Context, id string) (RequestRow, error) {
	if err := checkID(id); err != nil {
		return RequestRow{}, fmt.Errorf("store: get request %s: %w", id, err)
	}
	q := selectRequestColumns + " WHERE id = $1"
	t, v7 := uuidV7Time(id)
	if v7 {
		r, err := s.getRequest(ctx, q+" AND started_at >= $2 AND started_at < $3", id, t, t.Add(time.Millisecond))
		if !errors.Is(err, ErrNotFound) {
			return r, err
		}
		day := utcDay(t)
		return s.getRequest(ctx, q+" AND started_at >= $2 AND started_at < $3", id, day, day.AddDate(0, 0, 1))
	}
	return s.getRequest(ctx, q, id)
}

func (s *Store) getRequest(ctx context.Context, q string, args ...any) (RequestRow, error) {
	rows, _ := s.db.Query(ctx, q, args...)
	r, err := pgx.CollectExactlyOneRow(rows, scanRequest)
	if err != nil {
		return RequestRow{}, fmt.Errorf("store: get request %s: %w", args[0], translate(err))
	}
	return r, nil
}

// uuidV7Time is the millisecond time of a version-7 uuid.
func uuidV7Time(id string) (time.Time, bool) {
	if !isUUID(id) || id[14] != '7' {
		return time.Time{}, false
	}
	ms, err := strconv.ParseUint(id[0:8]+id[9:13], 16, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(ms)).UTC(), true
}

// UsageQuery groups the request log by bucket and group.
type UsageQuery struct {
	GroupBy string // "key", "connection" or "model"
	Bucket  string // "hour" or "day" ("minute" for the overview's short ranges)
	Since   time.Time
	Until   time.Time
	// Key and Connection narrow the rows (id or name), as in RequestFilter.
	Key, Connection string
}

// UsageRow is one (bucket, group) of a UsageQuery. Rejected counts requests that
// Gatehouse refused itself before any upstream attempt (a Gatehouse code, no
// attempt); Errors counts every answer of status 400 or more, rejections included.
type UsageRow struct {
	Bucket       time.Time
	Group        string // the key's or connection's name, or the model (folded: foldedModelSQL)
	GroupID      string // the key's or connection's id ("" for models)
	Requests     int64
	Errors       int64
	Rejected     int64
	InputTokens  int64
	OutputTokens int64
	// CachedTokens and CacheWriteTokens are the parts of InputTokens read
	// from and written to the prompt cache.
	CachedTokens     int64
	CacheWriteTokens int64
	CostMicros       int64
}

// CacheHitRatio is the share of u's input tokens read from the prompt cache
// (0 without input).
func (u UsageRow) CacheHitRatio() float64 {
	if u.InputTokens <= 0 {
		return 0
	}
	return float64(u.CachedTokens) / float64(u.InputTokens)
}

// RequestUsage returns the aggregates of q, oldest bucket first, then by group.
func (s *Store) RequestUsage(ctx context.Context, q UsageQuery) ([]UsageRow, error) {
	var group, groupID string
	switch q.GroupBy {
	case "key":
		group, groupID = "coalesce(key_name, '')", "coalesce(key_id::text, '')"
	case "connection":
		group, groupID = "coalesce(connection_name, '')", "coalesce(connection_id::text, '')"
	case "model":
		group, groupID = "coalesce("+foldedModelSQL+", '')", "''"
	default:
		return nil, fmt.Errorf("store: request usage: %w: groupBy %q", ErrInvalid, q.GroupBy)
	}
	if q.Bucket != "minute" && q.Bucket != "hour" && q.Bucket != "day" {
		return nil, fmt.Errorf("store: request usage: %w: bucket %q", ErrInvalid, q.Bucket)
	}
	args := []any{q.Bucket, q.Since, q.Until}
	where := "started_at >= $2 AND started_at < $3"
	for _, f := range []struct{ v, idCol, nameCol string }{
		{q.Key, "key_id", "key_name"}, {q.Connection, "connection_id", "connection_name"},
	} {
		if f.v == "" {
			continue
		}
		args = append(args, f.v)
		col := f.nameCol
		if isUUID(f.v) {
			col = f.idCol
		}
		where += " AND " + col + " = $" + strconv.Itoa(len(args))
	}
	sql := `SELECT date_trunc($1, started_at, 'UTC') AS b, ` + group + ` AS g, ` + groupID + ` AS gid,
count(*), count(*) FILTER (WHERE status >= 400), count(*) FILTER (WHERE code IS NOT NULL AND attempts = 0),
coalesce(sum(input_tokens), 0)::bigint, coalesce(sum(output_tokens), 0)::bigint, coalesce(sum(cost_micros), 0)::bigint,
coalesce(sum(cached_tokens), 0)::bigint, coalesce(sum(cache_write_tokens), 0)::bigint
FROM requests WHERE ` + where + ` GROUP BY b, g, gid ORDER BY b, g, gid`
	rows, _ := s.db.Query(ctx, sql, args...)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (UsageRow, error) {
		var u UsageRow
		err := row.Scan(&u.Bucket, &u.Group, &u.GroupID, &u.Requests, &u.Errors, &u.Rejected,
			&u.InputTokens, &u.OutputTokens, &u.CostMicros, &u.CachedTokens, &u.CacheWriteTokens)
		u.Bucket = u.Bucket.UTC()
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: request usage: %w", translate(err))
	}
	return out, nil
}
