package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Usage is one connection's count for one UTC day: dispatched requests and tokens.
type Usage struct {
	Requests int64 `json:"requests"`
	Tokens   int64 `json:"tokens"`
}

// utcDay returns the UTC calendar day containing t, as midnight UTC.
func utcDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

var addUsageSQL = `
INSERT INTO usage_daily (connection_id, day, requests, tokens) VALUES ($1, $2, $3, $4)
ON CONFLICT (connection_id, day) DO UPDATE
SET requests = ` + satSum("usage_daily.requests", "EXCLUDED.requests") + `,
    tokens = ` + satSum("usage_daily.tokens", "EXCLUDED.tokens")

// AddUsage adds requests and tokens to a connection's count for the UTC day containing
// day, in one upsert. It returns ErrNotFound if the connection does not exist.
func (s *Store) AddUsage(ctx context.Context, connID string, day time.Time, requests, tokens int64) error {
	if err := checkID(connID); err != nil {
		return fmt.Errorf("store: add usage %s: %w", connID, err)
	}
	if _, err := s.db.Exec(ctx, addUsageSQL, connID, utcDay(day), requests, tokens); err != nil {
		return fmt.Errorf("store: add usage %s: %w", connID, translate(err))
	}
	return nil
}

const usageForDaySQL = `SELECT connection_id::text, requests, tokens FROM usage_daily WHERE day = $1`

// UsageForDay returns every connection's count for the UTC day containing day, by
// connection id; connections without usage that day are absent.
func (s *Store) UsageForDay(ctx context.Context, day time.Time) (map[string]Usage, error) {
	rows, err := s.db.Query(ctx, usageForDaySQL, utcDay(day))
	if err != nil {
		return nil, fmt.Errorf("store: usage for day: %w", translate(err))
	}
	defer rows.Close()
	m := map[string]Usage{}
	for rows.Next() {
		var (
			id string
			u  Usage
		)
		if err := rows.Scan(&id, &u.Requests, &u.Tokens); err != nil {
			return nil, fmt.Errorf("store: usage for day: %w", translate(err))
		}
		m[id] = u
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: usage for day: %w", translate(err))
	}
	return m, nil
}

// tryCountRequestSQL counts one request unless the day's count has reached the limit:
// the WHERE on DO UPDATE makes the check and the increment one atomic step, exact across
// replicas. A fresh row starts at 1, which is within any limit ≥ 1.
const tryCountRequestSQL = `
INSERT INTO usage_daily (connection_id, day, requests) VALUES ($1, $2, 1)
ON CONFLICT (connection_id, day) DO UPDATE
SET requests = usage_daily.requests + 1
WHERE usage_daily.requests < $3
RETURNING requests`

const usageRequestsSQL = `SELECT requests FROM usage_daily WHERE connection_id = $1 AND day = $2`

// TryCountRequest counts one request for a connection on the UTC day containing day if
// fewer than limit requests were counted that day (limit ≤ 0: no limit). It returns the
// day's count after the call and whether this request was counted. It returns
// ErrNotFound if the connection does not exist.
func (s *Store) TryCountRequest(ctx context.Context, connID string, day time.Time, limit int64) (count int64, ok bool, err error) {
	if err := checkID(connID); err != nil {
		return 0, false, fmt.Errorf("store: count request %s: %w", connID, err)
	}
	d := utcDay(day)
	if limit <= 0 {
		limit = 1<<63 - 1
	}
	err = s.db.QueryRow(ctx, tryCountRequestSQL, connID, d, limit).Scan(&count)
	if err = translate(err); err == nil {
		return count, true, nil
	} else if err != ErrNotFound {
		return 0, false, fmt.Errorf("store: count request %s: %w", connID, err)
	}
	// No row returned: the conflict's WHERE failed, the limit is reached.
	if err := s.db.QueryRow(ctx, usageRequestsSQL, connID, d).Scan(&count); err != nil {
		return 0, false, fmt.Errorf("store: count request %s: %w", connID, translate(err))
	}
	return count, false, nil
}

var addUsageTotalsSQL = addUsageSQL + `
RETURNING requests, tokens`

// AddUsageTotals is AddUsage that also returns the connection's counts for the day
// after the addition, in the same statement. It returns ErrNotFound if the connection
// does not exist.
func (s *Store) AddUsageTotals(ctx context.Context, connID string, day time.Time, requests, tokens int64) (Usage, error) {
	var u Usage
	if err := checkID(connID); err != nil {
		return u, fmt.Errorf("store: add usage %s: %w", connID, err)
	}
	err := s.db.QueryRow(ctx, addUsageTotalsSQL, connID, utcDay(day), requests, tokens).Scan(&u.Requests, &u.Tokens)
	if err != nil {
		return Usage{}, fmt.Errorf("store: add usage %s: %w", connID, translate(err))
	}
	return u, nil
}

// Client keys count their day in usage_daily_keys, as connections do in usage_daily:
// tokens for the key's tpd (and requests, for the record).

var addClientKeyUsageSQL = `
INSERT INTO usage_daily_keys (client_key_id, day, requests, tokens) VALUES ($1, $2, $3, $4)
ON CONFLICT (client_key_id, day) DO UPDATE
SET requests = ` + satSum("usage_daily_keys.requests", "EXCLUDED.requests") + `,
    tokens = ` + satSum("usage_daily_keys.tokens", "EXCLUDED.tokens") + `
RETURNING requests, tokens`

// AddClientKeyUsage adds requests and tokens to a client key's count for the UTC day
// containing day, in one upsert, and returns the day's counts after it. It returns
// ErrNotFound if the key does not exist.
func (s *Store) AddClientKeyUsage(ctx context.Context, keyID string, day time.Time, requests, tokens int64) (Usage, error) {
	var u Usage
	if err := checkID(keyID); err != nil {
		return u, fmt.Errorf("store: add client key usage %s: %w", keyID, err)
	}
	err := s.db.QueryRow(ctx, addClientKeyUsageSQL, keyID, utcDay(day), requests, tokens).Scan(&u.Requests, &u.Tokens)
	if err != nil {
		return Usage{}, fmt.Errorf("store: add client key usage %s: %w", keyID, translate(err))
	}
	return u, nil
}

const clientKeyUsageForDaySQL = `SELECT client_key_id::text, requests, tokens FROM usage_daily_keys WHERE day = $1`

// ClientKeyUsageForDay returns every client key's count for the UTC day containing day,
// by key id; keys without usage that day are absent.
func (s *Store) ClientKeyUsageForDay(ctx context.Context, day time.Time) (map[string]Usage, error) {
	rows, _ := s.db.Query(ctx, clientKeyUsageForDaySQL, utcDay(day))
	m := map[string]Usage{}
	var (
		id string
		u  Usage
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &u.Requests, &u.Tokens}, func() error {
		m[id] = u
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store: client key usage for day: %w", translate(err))
	}
	return m, nil
}
