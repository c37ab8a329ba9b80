package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// spendKey is one row of spend_daily.
type spendKey struct {
	day                  time.Time
	keyID, connID, model string
}

type spendSum struct {
	spendKey
	requests, in, out, cost int64
}

var addSpendSQL = `
INSERT INTO spend_daily (day, client_key_id, connection_id, model, requests, input_tokens, output_tokens, cost_micros)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (client_key_id, day, connection_id, model) DO UPDATE
SET requests = ` + satSum("spend_daily.requests", "EXCLUDED.requests") + `,
    input_tokens = ` + satSum("spend_daily.input_tokens", "EXCLUDED.input_tokens") + `,
    output_tokens = ` + satSum("spend_daily.output_tokens", "EXCLUDED.output_tokens") + `,
    cost_micros = ` + satSum("spend_daily.cost_micros", "EXCLUDED.cost_micros")

// spendSums sums request rows per spend_daily row. The writer keeps one and
// reuses it: summing a flush allocates nothing once it has seen its keys.
type spendSums struct {
	at   map[spendKey]int // index in sums
	sums []spendSum
}

// add sums the dispatched rows (a key, a connection and at least one attempt)
// per (UTC day, key, connection, upstream model), after what it holds.
func (ss *spendSums) add(rows []RequestRow) {
	if ss.at == nil {
		ss.at = map[spendKey]int{}
	}
	var dayStart, dayEnd int64 // the UTC day of the last row, Unix µs
	var day time.Time
	// last is the sum of the previous row summed. The first row summed always
	// starts a day (dayEnd is 0), which sets it to -1 before it is read.
	var last int
	for i := range rows {
		r := &rows[i]
		if r.Attempts == 0 {
			continue
		}
		if us := r.StartedAt.UnixMicro(); us < dayStart || us >= dayEnd {
			day = utcDay(r.StartedAt)
			dayStart, dayEnd = day.UnixMicro(), day.AddDate(0, 0, 1).UnixMicro()
			last = -1
		}
		j := last
		if j < 0 || ss.sums[j].keyID != r.KeyID || ss.sums[j].connID != r.ConnectionID || ss.sums[j].model != r.UpstreamModel {
			if !isUUID(r.KeyID) || !isUUID(r.ConnectionID) {
				continue
			}
			k := spendKey{day: day, keyID: r.KeyID, connID: r.ConnectionID, model: r.UpstreamModel}
			var ok bool
			if j, ok = ss.at[k]; !ok {
				j = len(ss.sums)
				ss.at[k] = j
				ss.sums = append(ss.sums, spendSum{spendKey: k})
			}
		}
		last = j
		s := &ss.sums[j]
		s.requests++
		s.in = satAdd(s.in, r.InputTokens)
		s.out = satAdd(s.out, r.OutputTokens)
		s.cost = satAdd(s.cost, r.CostMicros)
	}
}

// reset empties ss, keeping its memory.
func (ss *spendSums) reset() {
	clear(ss.at)
	clear(ss.sums)
	ss.sums = ss.sums[:0]
}

// addSpend adds the sums of rows (spendSums.add) to spend_daily, in one batch on
// tx. ss is scratch space, reset before and after.
func addSpend(ctx context.Context, tx pgx.Tx, rows []RequestRow, ss *spendSums) error {
	ss.reset()
	defer ss.reset()
	ss.add(rows)
	if len(ss.sums) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for i := range ss.sums {
		s := &ss.sums[i]
		// Cleaned here, once per sum: two models that clean alike are two upserts.
		b.Queue(addSpendSQL, s.day, s.keyID, s.connID, cleanText(s.model, 128), s.requests, s.in, s.out, s.cost)
	}
	return tx.SendBatch(ctx, b).Close()
}

// Spend is what a client key spent: today (UTC) and this month (UTC), in micro-dollars.
type Spend struct {
	TodayMicros int64
	MonthMicros int64
}

const clientKeySpendSQL = `
SELECT LEAST(coalesce(sum(cost_micros) FILTER (WHERE day = $2), 0), 9223372036854775807)::bigint, LEAST(coalesce(sum(cost_micros), 0), 9223372036854775807)::bigint
FROM spend_daily WHERE client_key_id = $1 AND day >= $3 AND day <= $2`

// ClientKeySpend returns key id's spend on now's UTC day and in its UTC month, as
// written so far (the request log's writer adds it about once a second).
func (s *Store) ClientKeySpend(ctx context.Context, id string, now time.Time) (Spend, error) {
	var sp Spend
	if err := checkID(id); err != nil {
		return sp, fmt.Errorf("store: client key spend %s: %w", id, err)
	}
	day := utcDay(now)
	month := time.Date(day.Year(), day.Month(), 1, 0, 0, 0, 0, time.UTC)
	if err := s.db.QueryRow(ctx, clientKeySpendSQL, id, day, month).Scan(&sp.TodayMicros, &sp.MonthMicros); err != nil {
		return Spend{}, fmt.Errorf("store: client key spend %s: %w", id, translate(err))
	}
	return sp, nil
}

const clientKeysSpendSQL = `
SELECT client_key_id::text, LEAST(coalesce(sum(cost_micros) FILTER (WHERE day = $1), 0), 9223372036854775807)::bigint, LEAST(sum(cost_micros), 9223372036854775807)::bigint
FROM spend_daily WHERE day >= $2 AND day <= $1 GROUP BY client_key_id`

// ClientKeysSpend returns every key's spend on now's UTC day and in its UTC month
// (as ClientKeySpend), by key id, in one query; a key that spent nothing this
// month is absent.
func (s *Store) ClientKeysSpend(ctx context.Context, now time.Time) (map[string]Spend, error) {
	day := utcDay(now)
	month := time.Date(day.Year(), day.Month(), 1, 0, 0, 0, 0, time.UTC)
	rows, _ := s.db.Query(ctx, clientKeysSpendSQL, day, month)
	out := map[string]Spend{}
	var (
		id string
		sp Spend
	)
	_, err := pgx.ForEachRow(rows, []any{&id, &sp.TodayMicros, &sp.MonthMicros}, func() error {
		out[id] = sp
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: client keys spend: %w", translate(err))
	}
	return out, nil
}
