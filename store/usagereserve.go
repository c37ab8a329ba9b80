package store

import (
	"context"
	"fmt"
	"time"
)

// Token reservations (gateway/ratelimit's doc, "Reservations"): before a
// request is dispatched its estimated tokens are added to the day's count
// of its connection and its client key, each only if the count stays within
// the day's budget (tpd), in one atomic statement, so that replicas sharing
// the database never reserve past it together. When the answer's usage is
// known the difference is added (AddUsageTotals, AddClientKeyUsage, with a
// negative amount when the estimate was high).

// reserveTokensSQL adds $3 tokens to a day's count unless that passes the limit
// $4: a fresh row only within it (the SELECT's WHERE), an existing one only
// when the sum stays within it (the DO UPDATE's WHERE). No row returned: it
// did not fit. The sum is compared as numeric, so no amount overflows; one
// that passes the check is within the limit, a bigint.
const reserveTokensSQL = `
INSERT INTO %[1]s (%[2]s, day, tokens) SELECT $1::uuid, $2::date, $3::bigint WHERE $3::bigint <= $4::bigint
ON CONFLICT (%[2]s, day) DO UPDATE
SET tokens = %[1]s.tokens + EXCLUDED.tokens
WHERE %[1]s.tokens::numeric + EXCLUDED.tokens <= $4::bigint
RETURNING tokens`

const usageTokensSQL = `SELECT tokens FROM %[1]s WHERE %[2]s = $1 AND day = $2`

var (
	reserveConnTokensSQL = fmt.Sprintf(reserveTokensSQL, "usage_daily", "connection_id")
	reserveKeyTokensSQL  = fmt.Sprintf(reserveTokensSQL, "usage_daily_keys", "client_key_id")
	connTokensSQL        = fmt.Sprintf(usageTokensSQL, "usage_daily", "connection_id")
	keyTokensSQL         = fmt.Sprintf(usageTokensSQL, "usage_daily_keys", "client_key_id")
)

// ReserveTokens adds tokens to a connection's count for the UTC day containing
// day if the count stays within limit (limit ≤ 0: no limit), in one atomic
// step exact across replicas. It returns the day's tokens after the call and
// whether the tokens were added. It returns ErrNotFound if the connection does
// not exist.
func (s *Store) ReserveTokens(ctx context.Context, connID string, day time.Time, tokens, limit int64) (total int64, ok bool, err error) {
	return s.reserveTokens(ctx, "connection", reserveConnTokensSQL, connTokensSQL, connID, day, tokens, limit)
}

// ReserveClientKeyTokens is ReserveTokens for a client key's day
// (usage_daily_keys): the key's tpd.
func (s *Store) ReserveClientKeyTokens(ctx context.Context, keyID string, day time.Time, tokens, limit int64) (total int64, ok bool, err error) {
	return s.reserveTokens(ctx, "client key", reserveKeyTokensSQL, keyTokensSQL, keyID, day, tokens, limit)
}

func (s *Store) reserveTokens(ctx context.Context, what, reserveSQL, readSQL, id string, day time.Time, tokens, limit int64) (int64, bool, error) {
	if err := checkID(id); err != nil {
		return 0, false, fmt.Errorf("store: reserve tokens of %s %s: %w", what, id, err)
	}
	d := utcDay(day)
	if limit <= 0 {
		limit = 1<<63 - 1
	}
	var total int64
	err := translate(s.db.QueryRow(ctx, reserveSQL, id, d, tokens, limit).Scan(&total))
	if err == nil {
		return total, true, nil
	}
	if err != ErrNotFound {
		return 0, false, fmt.Errorf("store: reserve tokens of %s %s: %w", what, id, err)
	}
	// No row returned: the tokens did not fit (or the id is unknown, which a
	// fresh row's foreign key would have said; a reservation that does not fit
	// a fresh day inserts nothing, so read what there is).
	if err := translate(s.db.QueryRow(ctx, readSQL, id, d).Scan(&total)); err != nil && err != ErrNotFound {
		return 0, false, fmt.Errorf("store: reserve tokens of %s %s: %w", what, id, err)
	}
	return total, false, nil
}
