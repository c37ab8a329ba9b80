package store

import (
	"context"
	"crypto/cipher"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Sentinel errors. Methods wrap them with context; test with errors.Is.
var (
	// ErrNotFound means the row does not exist (also for ids that are not valid uuids).
	ErrNotFound = errors.New("store: not found")
	// ErrConflict means a uniqueness rule was violated (a name or email already taken)
	// or the write would break an invariant such as "at least one admin".
	ErrConflict = errors.New("store: conflict")
	// ErrStale means the caller's expected version does not match the stored one;
	// nothing was written.
	ErrStale = errors.New("store: stale version")
	// ErrInvalid means the database (or a store precondition) rejected a value, e.g. a
	// role outside admin|viewer or overrides that are not a JSON object.
	ErrInvalid = errors.New("store: invalid value")
	// ErrInvalidCredentials means an email/password pair did not authenticate.
	ErrInvalidCredentials = errors.New("store: invalid credentials")
	// ErrUnavailable means the database could not be reached; the caller may retry.
	ErrUnavailable = errors.New("store: database unavailable")
)

// DB is what the store runs its queries on: a *pgxpool.Pool or a pgx.Tx.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Store gives typed access to Gatehouse's tables.
type Store struct {
	pool   *pgxpool.Pool
	db     DB
	sealer cipher.AEAD
	logger *slog.Logger
	// parts holds the UTC days (time.Time) whose request log partition is known
	// to exist (WriteRequests), shared by the copies of withDB.
	parts  *sync.Map
	hashes *hashGate // shared by every Store bound to a transaction of this one
}

// New returns a Store over pool. secretKey must be 32 bytes (see ParseSecretKey); the
// upstream-secret encryption key is derived from it. A nil logger discards logs.
func New(pool *pgxpool.Pool, secretKey []byte, logger *slog.Logger) (*Store, error) {
	if pool == nil {
		return nil, errors.New("store: nil pool")
	}
	aead, err := newSealer(secretKey)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Store{pool: pool, db: pool, sealer: aead, logger: logger, parts: new(sync.Map), hashes: newHashGate()}, nil
}

// InTx runs fn with a Store bound to one transaction; the transaction commits when fn
// returns nil and rolls back otherwise. fn's error is returned unchanged. Called on a
// Store that is already in a transaction, it uses a savepoint.
func (s *Store) InTx(ctx context.Context, fn func(tx *Store) error) error {
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		return fn(s.withDB(tx))
	})
}

func (s *Store) withDB(db DB) *Store {
	c := *s
	c.db = db
	return &c
}

// inTx runs fn in a transaction on s.db (a savepoint if s.db is already a transaction).
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.db, fn)
}

// SQLSTATE codes the store gives a meaning to.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	codeCheckViolation      = "23514"
	codeNotNullViolation    = "23502"
	codeInvalidTextRepr     = "22P02"
)

// translate maps driver errors onto the store's sentinels. It is the only place that
// looks at pgx.ErrNoRows and SQLSTATE codes. The original error stays in the chain.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	if unreachable(err) {
		return &dbError{sentinel: ErrUnavailable, cause: err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeUniqueViolation:
			return &dbError{sentinel: ErrConflict, cause: err}
		case codeForeignKeyViolation:
			// A referenced row (a connection, a user) does not exist (any more).
			return &dbError{sentinel: ErrNotFound, cause: err}
		case codeInvalidTextRepr:
			// Ids are checked before they reach Postgres (see checkID), so this is a
			// malformed value such as invalid JSON text.
			return &dbError{sentinel: ErrInvalid, cause: err}
		case codeCheckViolation, codeNotNullViolation:
			return &dbError{sentinel: ErrInvalid, cause: err}
		}
	}
	return err
}

// dbError carries a sentinel and the driver error that caused it.
// unreachable reports whether err means the server is away rather than the statement
// wrong: no connection, a connection the server ended as it stopped or crashed (SQLSTATE
// class 57P: admin_shutdown, crash_shutdown, cannot_connect_now while it recovers), or
// one whose socket broke. The managed Postgres comes back by itself (pglocal's
// supervisor), so these are worth a retry.
func unreachable(err error) bool {
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || pgconn.SafeToRetry(err) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "57P")
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

type dbError struct {
	sentinel error
	cause    error
}

func (e *dbError) Error() string   { return e.sentinel.Error() + ": " + e.cause.Error() }
func (e *dbError) Unwrap() []error { return []error{e.sentinel, e.cause} }

// checkID reports ErrNotFound for strings that cannot be a uuid: such a row cannot exist,
// and pgx would otherwise fail while encoding the argument.
func checkID(id string) error {
	if !isUUID(id) {
		return fmt.Errorf("%w: malformed id", ErrNotFound)
	}
	return nil
}

// isUUID accepts the canonical 8-4-4-4-12 hex form that Postgres returns.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
