package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// CostRow is one model's, provider's, connection's or client key's share of
// the request log over a time range: requests, tokens and cost.
type CostRow struct {
	// Group is "model", "provider", "connection" or "key"; ID the
	// connection's or key's id ("" otherwise, and for rows without one);
	// Name the model (folded: see CostRanking), provider, connection or key
	// name ("" for none).
	Group, ID, Name string
	Requests        int64
	InputTokens     int64
	OutputTokens    int64
	CostMicros      int64
}

// foldedModelSQL is a row's model as cost and usage group it: the upstream id
// it was sent as, so an alias and provider/model fold into the upstream's
// name; a request that reached no connection is named by the model it asked
// for, without a provider/ prefix. NULL: no model.
const foldedModelSQL = `coalesce(upstream_model, CASE WHEN strpos(model, '/') > 0 THEN substr(model, strpos(model, '/') + 1) ELSE model END)`

// costRankingSQL sums the range's rows four ways, models folded.
const costRankingSQL = `
WITH r AS (
  SELECT ` + foldedModelSQL + ` AS m,
         provider, connection_id, connection_name, key_id, key_name, input_tokens, output_tokens, cost_micros
  FROM requests WHERE started_at >= $1 AND started_at < $2)
SELECT 'model', '', coalesce(m, ''), count(*), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cost_micros)::bigint FROM r GROUP BY m
UNION ALL
SELECT 'provider', '', coalesce(provider, ''), count(*), sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cost_micros)::bigint FROM r GROUP BY provider
UNION ALL
SELECT 'connection', coalesce(connection_id::text, ''), coalesce(max(connection_name), ''), count(*), sum(input_tokens)::bigint,
       sum(output_tokens)::bigint, sum(cost_micros)::bigint FROM r GROUP BY connection_id
UNION ALL
SELECT 'key', coalesce(key_id::text, ''), coalesce(max(key_name), ''), count(*), sum(input_tokens)::bigint,
       sum(output_tokens)::bigint, sum(cost_micros)::bigint FROM r GROUP BY key_id`

// CostRanking sums the request log from since (inclusive) to until
// (exclusive) by model, provider, connection and client key, in no order
// (the page ranks them).
func (s *Store) CostRanking(ctx context.Context, since, until time.Time) ([]CostRow, error) {
	rows, _ := s.db.Query(ctx, costRankingSQL, since, until)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (CostRow, error) {
		var c CostRow
		err := row.Scan(&c.Group, &c.ID, &c.Name, &c.Requests, &c.InputTokens, &c.OutputTokens, &c.CostMicros)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: cost ranking: %w", translate(err))
	}
	return out, nil
}
