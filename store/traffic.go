package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// TrafficRow is one (connection, key, status, code) of the request log since a
// moment (a refusal at the key's own gates counts under no connection): how
// many requests ended so, and how many of them were dispatched and
// failed upstream (429 or 5xx after at least one attempt, answered by the
// upstream's failure rather than a gate of the gateway's own). ConnectionID is "" for a
// request that reached no connection, KeyID "" for one without a known key.
type TrafficRow struct {
	ConnectionID     string
	KeyID            string
	Status           int
	Code             string
	Requests         int64
	UpstreamFailures int64
}

// upstreamFailureCodes says that a row's answer came from the upstream's
// failure: no code (logged before upstream failures were named) or one of the
// upstream's. A key's own refusal (RATE_LIMIT_RPM at the key's gate after an
// attempt) or the client hanging up is not its connection's failure.
const upstreamFailureCodes = `(code IS NULL OR code IN ('UPSTREAM_COOLDOWN', 'UPSTREAM_UNAVAILABLE', 'UPSTREAM_STREAM_ERROR', 'RATE_LIMIT_EXECUTION_TIMEOUT'))`

// keyGateSQL says that a row was held back or refused by its client key's own
// gates (key:, key-rpm:, key-tpm:, key-tpd:): that is the key's doing, never
// its connection's, even after an attempt there.
const keyGateSQL = `(gate LIKE 'key:%' OR gate LIKE 'key-%')`

const recentTrafficSQL = `
SELECT coalesce(CASE WHEN ` + keyGateSQL + ` THEN NULL ELSE connection_id END::text, ''), coalesce(key_id::text, ''), status, coalesce(code, ''),
       count(*), count(*) FILTER (WHERE attempts > 0 AND (status = 429 OR status >= 500) AND ` + upstreamFailureCodes + `)
FROM requests WHERE started_at >= $1 AND started_at <= $2
GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`

// RecentTraffic sums the request log from since to until by connection, key,
// status and code: the overview's "last minute". Rows reach the log about a second
// after their request ends.
func (s *Store) RecentTraffic(ctx context.Context, since, until time.Time) ([]TrafficRow, error) {
	rows, _ := s.db.Query(ctx, recentTrafficSQL, since, until)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TrafficRow, error) {
		var t TrafficRow
		err := row.Scan(&t.ConnectionID, &t.KeyID, &t.Status, &t.Code, &t.Requests, &t.UpstreamFailures)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: recent traffic: %w", translate(err))
	}
	return out, nil
}

// DayTotal is one (key, connection) of spend_daily for a UTC day: dispatched
// requests, input plus output tokens, and cost in micro-dollars.
type DayTotal struct {
	KeyID        string
	ConnectionID string
	Requests     int64
	Tokens       int64
	CostMicros   int64
}

const dayTotalsSQL = `
SELECT client_key_id::text, connection_id::text, sum(requests)::bigint,
       sum(input_tokens + output_tokens)::bigint, sum(cost_micros)::bigint
FROM spend_daily WHERE day = $1 GROUP BY 1, 2 ORDER BY 1, 2`

// DayTotals returns the spend of the UTC day containing day by key and connection,
// as written so far.
func (s *Store) DayTotals(ctx context.Context, day time.Time) ([]DayTotal, error) {
	rows, _ := s.db.Query(ctx, dayTotalsSQL, utcDay(day))
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DayTotal, error) {
		var d DayTotal
		err := row.Scan(&d.KeyID, &d.ConnectionID, &d.Requests, &d.Tokens, &d.CostMicros)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: day totals: %w", translate(err))
	}
	return out, nil
}
