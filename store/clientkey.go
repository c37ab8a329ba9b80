package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClientKeyPrefix starts every client key the store generates.
const ClientKeyPrefix = "gh_ck_"

// ClientKey is a gateway credential for agents: a tenant of the gateway, with limits
// of its own. Only a SHA-256 of its secret is stored; Preview shows its prefix and
// last four characters. Its JSON form is the API's and the audit log's.
type ClientKey struct {
	ID      string `json:"id" db:"id"`
	Name    string `json:"name" db:"name"`
	Preview string `json:"preview" db:"preview"`
	Enabled bool   `json:"enabled" db:"enabled"`
	// Limits is the stored limits document (gateway/limits.ClientKeyLimits), never
	// empty: {} when the key has none.
	Limits     json.RawMessage `json:"limits" db:"limits"`
	Version    int64           `json:"version" db:"version"`
	CreatedAt  time.Time       `json:"createdAt" db:"created_at"`
	UpdatedAt  time.Time       `json:"updatedAt" db:"updated_at"`
	LastUsedAt *time.Time      `json:"lastUsedAt" db:"last_used_at"`
}

// ClientKeyInput holds the writable fields of a client key. Empty or null Limits are
// stored as {}. Limits are validated by the caller (gateway/limits); the store only
// makes sure they are a JSON object.
type ClientKeyInput struct {
	Name    string          `json:"name"`
	Enabled bool            `json:"enabled"`
	Limits  json.RawMessage `json:"limits"`
}

// NewClientKeyInput is the input of a new, enabled client key named name without
// limits of its own.
func NewClientKeyInput(name string) ClientKeyInput {
	return ClientKeyInput{Name: name, Enabled: true}
}

// Input returns k's writable fields: the usual starting point for an update function.
func (k ClientKey) Input() ClientKeyInput {
	return ClientKeyInput{Name: k.Name, Enabled: k.Enabled, Limits: append(json.RawMessage(nil), k.Limits...)}
}

func (in ClientKeyInput) normalized() ClientKeyInput {
	if t := bytes.TrimSpace(in.Limits); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		in.Limits = json.RawMessage("{}")
	}
	return in
}

func (in ClientKeyInput) check() error {
	if in.Name == "" {
		return fmt.Errorf("%w: name is required", ErrInvalid)
	}
	if !json.Valid(in.Limits) {
		return fmt.Errorf("%w: limits is not valid JSON", ErrInvalid)
	}
	return nil
}

const clientKeyColumns = `id, name, preview, enabled, limits, version, created_at, updated_at, last_used_at`

const insertClientKeySQL = `
INSERT INTO client_keys (name, secret_hash, preview, enabled, limits) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (secret_hash) DO NOTHING
RETURNING ` + clientKeyColumns

// CreateClientKey creates a client key with a new random secret, which is returned here
// and never again, with its audit row and config notification (the gateway learns of
// it through the notification, or at its first use). It returns ErrConflict when the
// name is taken and ErrInvalid for a name or limits that break a table rule.
func (s *Store) CreateClientKey(ctx context.Context, actor string, in ClientKeyInput) (ClientKey, string, error) {
	secret := newSecret(ClientKeyPrefix)
	k, created, err := s.insertClientKey(ctx, s.db, actor, in, secret)
	if err == nil && !created {
		err = fmt.Errorf("%w: secret collision", ErrConflict) // 256 random bits: not in practice
	}
	if err != nil {
		return ClientKey{}, "", fmt.Errorf("store: create client key %q: %w", in.Name, err)
	}
	return k, secret, nil
}

// maxEnsureNames bounds the names EnsureClientKey tries.
const maxEnsureNames = 100

// EnsureClientKey makes sure a client key with exactly this secret exists (bootstrap
// from configuration); if one exists nothing changes and created is false. A new key
// takes name, or name-2, name-3, … when another key holds it (names are unique, and a
// changed bootstrap secret must not stop the server). It returns ErrInvalid for a
// secret shorter than MinBootstrapSecretLen or an empty name.
func (s *Store) EnsureClientKey(ctx context.Context, name, secret string) (created bool, err error) {
	if len(secret) < MinBootstrapSecretLen {
		return false, fmt.Errorf("store: ensure client key: %w: secret shorter than %d characters", ErrInvalid, MinBootstrapSecretLen)
	}
	for i := 1; i <= maxEnsureNames; i++ {
		candidate := name
		if i > 1 {
			candidate = name + "-" + strconv.Itoa(i)
		}
		// Each try is a transaction (a savepoint inside a caller's) of its own, so a
		// name conflict leaves nothing to roll back but itself.
		_, created, err = s.insertClientKey(ctx, s.db, ActorSystem, NewClientKeyInput(candidate), secret)
		if !errors.Is(err, ErrConflict) {
			break
		}
	}
	if err == nil && !created {
		err = s.refreshPreview(ctx, "client_keys", secret)
	}
	if err != nil {
		return false, fmt.Errorf("store: ensure client key %q: %w", name, err)
	}
	return created, nil
}

func (s *Store) insertClientKey(ctx context.Context, db DB, actor string, in ClientKeyInput, secret string) (ClientKey, bool, error) {
	in = in.normalized()
	if err := in.check(); err != nil {
		return ClientKey{}, false, err
	}
	var (
		k       ClientKey
		created bool
	)
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, insertClientKeySQL, in.Name, hashSecret(secret), secretPreview(secret),
			in.Enabled, in.Limits)
		var err error
		if k, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ClientKey]); err != nil {
			if err = translate(err); err == ErrNotFound { // same secret exists already
				return nil
			}
			return err
		}
		created = true
		if err := audit(ctx, tx, actor, ActionCreate, EntityClientKey, k.ID, nil, k); err != nil {
			return err
		}
		return notifyConfig(ctx, tx, EntityClientKey+":"+k.ID)
	})
	return k, created, err
}

const lookupClientKeySQL = `
UPDATE client_keys SET last_used_at = now() WHERE secret_hash = $1
RETURNING ` + clientKeyColumns

// LookupClientKey returns the client key whose secret this is, disabled or not, and
// records its use. It returns ErrNotFound for an unknown secret. The gateway
// authenticates from a KeyCache instead, without a database round trip per request.
func (s *Store) LookupClientKey(ctx context.Context, secret string) (ClientKey, error) {
	rows, _ := s.db.Query(ctx, lookupClientKeySQL, hashSecret(secret))
	k, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ClientKey])
	if err != nil {
		return ClientKey{}, fmt.Errorf("store: lookup client key: %w", translate(err))
	}
	return k, nil
}

const touchClientKeysSQL = `UPDATE client_keys SET last_used_at = now() WHERE secret_hash = ANY($1)`

// TouchClientKeys records now as the last use of the client keys whose secrets hash to
// hashes (ClientKeyHash); unknown hashes are ignored.
func (s *Store) TouchClientKeys(ctx context.Context, hashes [][]byte) error {
	if _, err := s.db.Exec(ctx, touchClientKeysSQL, hashes); err != nil {
		return fmt.Errorf("store: record client key use: %w", translate(err))
	}
	return nil
}

// ClientKeyHash is the hash under which a client key's secret is stored.
func ClientKeyHash(secret string) [32]byte { return [32]byte(hashSecret(secret)) }

const clientKeysByHashSQL = `SELECT secret_hash, ` + clientKeyColumns + ` FROM client_keys`

// ClientKeysByHash returns every client key by the SHA-256 of its secret (see
// ClientKeyHash), for the gateway's in-memory KeyCache.
func (s *Store) ClientKeysByHash(ctx context.Context) (map[[32]byte]ClientKey, error) {
	rows, _ := s.db.Query(ctx, clientKeysByHashSQL)
	type row struct {
		Hash []byte `db:"secret_hash"`
		ClientKey
	}
	rs, err := pgx.CollectRows(rows, pgx.RowToStructByName[row])
	if err != nil {
		return nil, fmt.Errorf("store: client keys by hash: %w", translate(err))
	}
	m := make(map[[32]byte]ClientKey, len(rs))
	for _, r := range rs {
		if len(r.Hash) != 32 {
			return nil, fmt.Errorf("store: client keys by hash: key %s: hash is %d bytes", r.ID, len(r.Hash))
		}
		m[[32]byte(r.Hash)] = r.ClientKey
	}
	return m, nil
}

const listClientKeysSQL = `SELECT ` + clientKeyColumns + ` FROM client_keys ORDER BY name`

// ListClientKeys returns every client key, by name.
func (s *Store) ListClientKeys(ctx context.Context) ([]ClientKey, error) {
	rows, _ := s.db.Query(ctx, listClientKeysSQL)
	ks, err := pgx.CollectRows(rows, pgx.RowToStructByName[ClientKey])
	if err != nil {
		return nil, fmt.Errorf("store: list client keys: %w", translate(err))
	}
	return ks, nil
}

const getClientKeySQL = `SELECT ` + clientKeyColumns + ` FROM client_keys WHERE id = $1`

// GetClientKey returns one client key (never its secret), or ErrNotFound.
func (s *Store) GetClientKey(ctx context.Context, id string) (ClientKey, error) {
	k, err := getClientKey(ctx, s.db, getClientKeySQL, id)
	if err != nil {
		return ClientKey{}, fmt.Errorf("store: get client key %s: %w", id, err)
	}
	return k, nil
}

func getClientKey(ctx context.Context, db DB, sql, id string) (ClientKey, error) {
	if err := checkID(id); err != nil {
		return ClientKey{}, err
	}
	rows, _ := db.Query(ctx, sql, id)
	k, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ClientKey])
	return k, translate(err)
}

const lockClientKeySQL = getClientKeySQL + ` FOR UPDATE`

const updateClientKeySQL = `
UPDATE client_keys SET name = $2, enabled = $3, limits = $4, version = version + 1, updated_at = now()
WHERE id = $1
RETURNING ` + clientKeyColumns

// UpdateClientKey changes a client key in one transaction, as UpdateConnection does a
// connection: it locks the row, returns ErrStale (writing nothing) if expectedVersion
// is not 0 and differs from the stored version, calls fn with the current row, writes
// what fn returns, bumps the version, and writes the audit row and the config
// notification. An error from fn aborts the update and is returned unwrapped. Other
// errors: ErrNotFound, ErrConflict (name taken), ErrInvalid.
func (s *Store) UpdateClientKey(ctx context.Context, actor, id string, expectedVersion int64,
	fn func(cur ClientKey) (ClientKeyInput, error)) (ClientKey, error) {
	lock := func(tx pgx.Tx) (ClientKey, error) { return getClientKey(ctx, tx, lockClientKeySQL, id) }
	return updateLocked(ctx, s, "update client key "+id, expectedVersion, lock, fn,
		func(tx pgx.Tx, cur ClientKey, in ClientKeyInput) (ClientKey, error) {
			in = in.normalized()
			if err := in.check(); err != nil {
				return ClientKey{}, err
			}
			rows, _ := tx.Query(ctx, updateClientKeySQL, id, in.Name, in.Enabled, in.Limits)
			updated, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ClientKey])
			if err != nil {
				return ClientKey{}, translate(err)
			}
			if err := audit(ctx, tx, actor, ActionUpdate, EntityClientKey, id, cur, updated); err != nil {
				return ClientKey{}, err
			}
			return updated, notifyConfig(ctx, tx, EntityClientKey+":"+id)
		})
}

const deleteClientKeySQL = `DELETE FROM client_keys WHERE id = $1`

// DeleteClientKey revokes a client key (and its usage counters), with an audit row and
// a config notification (so gateways drop it). It returns ErrNotFound, or ErrStale if
// expectedVersion is not 0 and differs from the stored version.
func (s *Store) DeleteClientKey(ctx context.Context, actor, id string, expectedVersion int64) error {
	lock := func(tx pgx.Tx) (ClientKey, error) { return getClientKey(ctx, tx, lockClientKeySQL, id) }
	return deleteLocked(ctx, s, "delete client key "+id, actor, EntityClientKey, id, expectedVersion, lock, deleteClientKeySQL)
}
