package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ClientKeyPrefix starts every client key the store generates.
const ClientKeyPrefix = "gh_ck_"

// ClientKey is a gateway credential for agents. Only a SHA-256 of its secret is
// stored; Preview shows its prefix and last four characters.
type ClientKey struct {
	ID         string     `json:"id" db:"id"`
	Name       string     `json:"name" db:"name"`
	Preview    string     `json:"preview" db:"preview"`
	CreatedAt  time.Time  `json:"createdAt" db:"created_at"`
	LastUsedAt *time.Time `json:"lastUsedAt" db:"last_used_at"`
}

const clientKeyColumns = `id, name, preview, created_at, last_used_at`

const insertClientKeySQL = `
INSERT INTO client_keys (name, secret_hash, preview) VALUES ($1, $2, $3)
ON CONFLICT (secret_hash) DO NOTHING
RETURNING ` + clientKeyColumns

// CreateClientKey creates a client key with a new random secret, which is returned here
// and never again. The gateway learns of it through the config notification. It
// returns ErrInvalid for an empty name.
func (s *Store) CreateClientKey(ctx context.Context, actor, name string) (ClientKey, string, error) {
	secret := newSecret(ClientKeyPrefix)
	k, created, err := s.insertClientKey(ctx, actor, name, secret)
	if err == nil && !created {
		err = fmt.Errorf("%w: secret collision", ErrConflict) // 256 random bits: not in practice
	}
	if err != nil {
		return ClientKey{}, "", fmt.Errorf("store: create client key %q: %w", name, err)
	}
	return k, secret, nil
}

// EnsureClientKey makes sure a client key with exactly this secret exists (bootstrap
// from configuration); if one exists nothing changes and created is false. It returns
// ErrInvalid for a secret shorter than MinBootstrapSecretLen or an empty name.
func (s *Store) EnsureClientKey(ctx context.Context, name, secret string) (created bool, err error) {
	if len(secret) < MinBootstrapSecretLen {
		return false, fmt.Errorf("store: ensure client key: %w: secret shorter than %d characters", ErrInvalid, MinBootstrapSecretLen)
	}
	_, created, err = s.insertClientKey(ctx, ActorSystem, name, secret)
	if err != nil {
		return false, fmt.Errorf("store: ensure client key %q: %w", name, err)
	}
	return created, nil
}

func (s *Store) insertClientKey(ctx context.Context, actor, name, secret string) (ClientKey, bool, error) {
	if name == "" {
		return ClientKey{}, false, fmt.Errorf("%w: name is required", ErrInvalid)
	}
	var (
		k       ClientKey
		created bool
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, insertClientKeySQL, name, hashSecret(secret), tokenPreview(secret, ClientKeyPrefix))
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

// LookupClientKey returns the client key whose secret this is and records its use. It
// returns ErrNotFound for an unknown secret. The gateway authenticates from
// ClientKeyHashes instead, without a database round trip per request.
func (s *Store) LookupClientKey(ctx context.Context, secret string) (ClientKey, error) {
	rows, _ := s.db.Query(ctx, lookupClientKeySQL, hashSecret(secret))
	k, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ClientKey])
	if err != nil {
		return ClientKey{}, fmt.Errorf("store: lookup client key: %w", translate(err))
	}
	return k, nil
}

// ClientKeyHash is the hash under which a client key's secret is stored.
func ClientKeyHash(secret string) [32]byte { return [32]byte(hashSecret(secret)) }

const clientKeyHashesSQL = `SELECT secret_hash, name FROM client_keys`

// ClientKeyHashes returns the SHA-256 of every client key's secret (see ClientKeyHash)
// with the key's name, for the gateway's in-memory set (the name labels its traces).
func (s *Store) ClientKeyHashes(ctx context.Context) (map[[32]byte]string, error) {
	rows, _ := s.db.Query(ctx, clientKeyHashesSQL)
	defer rows.Close()
	hs := make(map[[32]byte]string)
	for rows.Next() {
		var b []byte
		var name string
		if err := rows.Scan(&b, &name); err != nil {
			return nil, fmt.Errorf("store: client key hashes: %w", translate(err))
		}
		if len(b) != 32 {
			return nil, fmt.Errorf("store: client key hashes: hash is %d bytes", len(b))
		}
		hs[[32]byte(b)] = name
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: client key hashes: %w", translate(err))
	}
	return hs, nil
}

const listClientKeysSQL = `SELECT ` + clientKeyColumns + ` FROM client_keys ORDER BY created_at, name`

// ListClientKeys returns every client key, oldest first.
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
	if err := checkID(id); err != nil {
		return ClientKey{}, fmt.Errorf("store: get client key %s: %w", id, err)
	}
	rows, _ := s.db.Query(ctx, getClientKeySQL, id)
	k, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ClientKey])
	if err != nil {
		return ClientKey{}, fmt.Errorf("store: get client key %s: %w", id, translate(err))
	}
	return k, nil
}

const deleteClientKeySQL = `DELETE FROM client_keys WHERE id = $1 RETURNING ` + clientKeyColumns

// DeleteClientKey revokes a client key, with an audit row and a config notification
// (so gateways drop it). It returns ErrNotFound.
func (s *Store) DeleteClientKey(ctx context.Context, actor, id string) error {
	if err := checkID(id); err != nil {
		return fmt.Errorf("store: delete client key %s: %w", id, err)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, deleteClientKeySQL, id)
		k, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ClientKey])
		if err != nil {
			return translate(err)
		}
		if err := audit(ctx, tx, actor, ActionDelete, EntityClientKey, id, k, nil); err != nil {
			return err
		}
		return notifyConfig(ctx, tx, EntityClientKey+":"+id)
	})
	if err != nil {
		return fmt.Errorf("store: delete client key %s: %w", id, err)
	}
	return nil
}
