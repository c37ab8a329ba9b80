package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Money reservations (gateway/ratelimit's doc, "Reservations"): before a
// request of a client key with a money budget is dispatched, its estimated
// cost is added to the key's spend of the UTC day and of the UTC month
// (table key_spend_reserved), each only while it stays within its budget,
// both in one transaction or neither. When the answer's cost is known the
// difference is added (AddClientKeySpend, negative when the estimate was
// high).

// KeySpend is a client key's spend, reservations included, in micro-dollars
// for one UTC day and the UTC month holding it.
type KeySpend struct {
	Day, Month int64
}

// SpendPeriod names the budget a money reservation did not fit.
type SpendPeriod uint8

const (
	SpendFits  SpendPeriod = iota // it fitted both
	SpendDay                      // the day's budget
	SpendMonth                    // the month's budget
)

// reserveSpendSQL adds $4 to one period's row unless that passes $5, as
// reserveTokensSQL does; no row returned: it did not fit.
const reserveSpendSQL = `
INSERT INTO key_spend_reserved (client_key_id, period, start, micros)
SELECT $1::uuid, $2::"char", $3::date, $4::bigint WHERE $4::bigint <= $5::bigint
ON CONFLICT (client_key_id, period, start) DO UPDATE
SET micros = key_spend_reserved.micros + EXCLUDED.micros
WHERE key_spend_reserved.micros::numeric + EXCLUDED.micros <= $5::bigint
RETURNING micros`

// addSpendReservedSQL adds $4 (maybe negative) to the day's and the month's
// rows, never below 0 nor past the bigint range, day first (the order every
// statement locks them in).
var addSpendReservedSQL = `
INSERT INTO key_spend_reserved (client_key_id, period, start, micros)
VALUES ($1::uuid, 'd', $2::date, GREATEST($4::bigint, 0)), ($1::uuid, 'm', $3::date, GREATEST($4::bigint, 0))
ON CONFLICT (client_key_id, period, start) DO UPDATE
SET micros = ` + satSum("key_spend_reserved.micros", "$4::bigint") + `
RETURNING period, micros`

const keySpendSQL = `
SELECT period, micros FROM key_spend_reserved
WHERE client_key_id = $1 AND ((period = 'd' AND start = $2) OR (period = 'm' AND start = $3))`

// utcMonth is the first instant of the UTC month holding t.
func utcMonth(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// errSpendBlocked rolls a reservation's transaction back.
var errSpendBlocked = errors.New("store: spend reservation does not fit")

// ReserveClientKeySpend adds micros to client key keyID's spend of the UTC
// day and of the UTC month holding at, if the day's stays within dayLimit
// and the month's within monthLimit (a limit ≤ 0: none), in one transaction:
// both or neither, exact across replicas. It returns the spend after the
// call and which budget it did not fit (SpendFits: added). An unknown key is
// ErrNotFound.
func (s *Store) ReserveClientKeySpend(ctx context.Context, keyID string, at time.Time, micros, dayLimit, monthLimit int64) (KeySpend, SpendPeriod, error) {
	if err := checkID(keyID); err != nil {
		return KeySpend{}, 0, fmt.Errorf("store: reserve spend of client key %s: %w", keyID, err)
	}
	noLimit := func(l int64) int64 {
		if l <= 0 {
			return 1<<63 - 1
		}
		return l
	}
	day, month := utcDay(at), utcMonth(at)
	var (
		sp      KeySpend
		blocked SpendPeriod
	)
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, reserveSpendSQL, keyID, "d", day, micros, noLimit(dayLimit)).Scan(&sp.Day)
		if errors.Is(err, pgx.ErrNoRows) {
			blocked = SpendDay
			return errSpendBlocked
		}
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, reserveSpendSQL, keyID, "m", month, micros, noLimit(monthLimit)).Scan(&sp.Month)
		if errors.Is(err, pgx.ErrNoRows) {
			blocked = SpendMonth
			return errSpendBlocked
		}
		return err
	})
	if err == nil {
		return sp, SpendFits, nil
	}
	if !errors.Is(err, errSpendBlocked) {
		return KeySpend{}, 0, fmt.Errorf("store: reserve spend of client key %s: %w", keyID, translate(err))
	}
	// It did not fit: say what the periods hold (a fresh period that does
	// not fit inserts nothing, and an unknown key has nothing).
	sp, err = s.ClientKeyBudgetSpend(ctx, keyID, at)
	if err != nil {
		return KeySpend{}, 0, err
	}
	if blocked == SpendDay && sp == (KeySpend{}) {
		// A fresh day fitted nothing; an unknown key is told apart here,
		// as a fresh row's foreign key would have.
		var one int
		if err := translate(s.db.QueryRow(ctx, `SELECT 1 FROM client_keys WHERE id = $1`, keyID).Scan(&one)); err != nil {
			return KeySpend{}, 0, fmt.Errorf("store: reserve spend of client key %s: %w", keyID, err)
		}
	}
	return sp, blocked, nil
}

// AddClientKeySpend adds micros (negative: gives back a reservation's
// excess; never below 0) to client key keyID's spend of the UTC day and the
// UTC month holding at, and returns the spend after.
func (s *Store) AddClientKeySpend(ctx context.Context, keyID string, at time.Time, micros int64) (KeySpend, error) {
	if err := checkID(keyID); err != nil {
		return KeySpend{}, fmt.Errorf("store: add spend of client key %s: %w", keyID, err)
	}
	sp, err := s.scanSpend(ctx, addSpendReservedSQL, keyID, at, micros)
	if err != nil {
		return KeySpend{}, fmt.Errorf("store: add spend of client key %s: %w", keyID, err)
	}
	return sp, nil
}

// ClientKeyBudgetSpend returns client key keyID's spend of the UTC day and the UTC
// month holding at, reservations included (0 where nothing was counted).
func (s *Store) ClientKeyBudgetSpend(ctx context.Context, keyID string, at time.Time) (KeySpend, error) {
	if err := checkID(keyID); err != nil {
		return KeySpend{}, fmt.Errorf("store: spend of client key %s: %w", keyID, err)
	}
	sp, err := s.scanSpend(ctx, keySpendSQL, keyID, at)
	if err != nil {
		return KeySpend{}, fmt.Errorf("store: spend of client key %s: %w", keyID, err)
	}
	return sp, nil
}

func (s *Store) scanSpend(ctx context.Context, sql, keyID string, at time.Time, more ...any) (KeySpend, error) {
	rows, err := s.db.Query(ctx, sql, append([]any{keyID, utcDay(at), utcMonth(at)}, more...)...)
	if err != nil {
		return KeySpend{}, translate(err)
	}
	var (
		sp     KeySpend
		period byte
		micros int64
	)
	_, err = pgx.ForEachRow(rows, []any{&period, &micros}, func() error {
		if period == 'd' {
			sp.Day = micros
		} else {
			sp.Month = micros
		}
		return nil
	})
	return sp, translate(err)
}
