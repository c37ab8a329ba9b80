package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// versioned is a row with a version, bumped by every write of it.
type versioned interface{ rowVersion() int64 }

func (c Connection) rowVersion() int64 { return c.Version }
func (k ClientKey) rowVersion() int64  { return k.Version }
func (s Settings) rowVersion() int64   { return s.Version }

// lockVersion reads a row with lock (FOR UPDATE) and makes the optimistic-concurrency
// check of every versioned write: ErrStale when expected is not 0 and differs from the
// stored version.
func lockVersion[R versioned](tx pgx.Tx, lock func(pgx.Tx) (R, error), expected int64) (R, error) {
	cur, err := lock(tx)
	if err != nil {
		return cur, err
	}
	if v := cur.rowVersion(); expected != 0 && v != expected {
		return cur, fmt.Errorf("%w: version is %d, not %d", ErrStale, v, expected)
	}
	return cur, nil
}

// updateLocked is the transaction of every versioned update (UpdateConnection,
// UpdateClientKey, UpdateSettings): lockVersion reads the row and checks its version
// against expectedVersion, fn turns it into the new input, and write stores
// that (with its audit row and config notification) and returns the row as stored.
// An error from fn aborts the update and is returned unwrapped; any other error is
// returned as "store: <what>: <error>".
func updateLocked[R versioned, I any](ctx context.Context, s *Store, what string, expectedVersion int64,
	lock func(pgx.Tx) (R, error), fn func(cur R) (I, error), write func(tx pgx.Tx, cur R, in I) (R, error)) (R, error) {
	var (
		updated, zero R
		fnErr         error
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := lockVersion(tx, lock, expectedVersion)
		if err != nil {
			return err
		}
		in, err := fn(cur)
		if err != nil {
			fnErr = err
			return err
		}
		updated, err = write(tx, cur, in)
		return err
	})
	if fnErr != nil {
		return zero, fnErr
	}
	if err != nil {
		return zero, fmt.Errorf("store: %s: %w", what, err)
	}
	return updated, nil
}

// deleteLocked is the transaction of every versioned delete (DeleteConnection,
// DeleteClientKey): lockVersion reads the row and checks its version against
// expectedVersion, deleteSQL (with id as $1) removes it, and the audit row and the
// config notification for entity id are written. Errors are returned as
// "store: <what>: <error>".
func deleteLocked[R versioned](ctx context.Context, s *Store, what, actor, entity, id string, expectedVersion int64,
	lock func(pgx.Tx) (R, error), deleteSQL string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := lockVersion(tx, lock, expectedVersion)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, deleteSQL, id); err != nil {
			return translate(err)
		}
		if err := audit(ctx, tx, actor, ActionDelete, entity, id, cur, nil); err != nil {
			return err
		}
		return notifyConfig(ctx, tx, entity+":"+id)
	})
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return nil
}
