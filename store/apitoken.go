package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// APITokenPrefix starts every API token the store generates.
const APITokenPrefix = "gh_at_"

// MinBootstrapSecretLen is the shortest secret EnsureAPIToken and EnsureClientKey accept.
const MinBootstrapSecretLen = 16

// APIToken is a REST API credential. Only a SHA-256 of its secret is stored; Preview
// shows its prefix and last four characters.
type APIToken struct {
	ID         string     `json:"id" db:"id"`
	Name       string     `json:"name" db:"name"`
	Role       string     `json:"role" db:"role"`
	Preview    string     `json:"preview" db:"preview"`
	CreatedAt  time.Time  `json:"createdAt" db:"created_at"`
	LastUsedAt *time.Time `json:"lastUsedAt" db:"last_used_at"`
}

const apiTokenColumns = `id, name, role, preview, created_at, last_used_at`

const insertAPITokenSQL = `
INSERT INTO api_tokens (name, role, secret_hash, preview) VALUES ($1, $2, $3, $4)
ON CONFLICT (secret_hash) DO NOTHING
RETURNING ` + apiTokenColumns

// CreateAPIToken creates a token with a new random secret, which is returned here and
// never again. It returns ErrInvalid for an empty name or a role other than RoleAdmin
// or RoleViewer.
func (s *Store) CreateAPIToken(ctx context.Context, actor, name, role string) (APIToken, string, error) {
	secret := newSecret(APITokenPrefix)
	t, created, err := s.insertAPIToken(ctx, actor, name, role, secret, secretPreview(secret))
	if err == nil && !created {
		err = fmt.Errorf("%w: secret collision", ErrConflict) // 256 random bits: not in practice
	}
	if err != nil {
		return APIToken{}, "", fmt.Errorf("store: create api token %q: %w", name, err)
	}
	return t, secret, nil
}

// EnsureAPIToken makes sure a token with exactly this secret exists (bootstrap from
// configuration). If one exists, whatever its name and role, nothing changes and
// created is false. It returns ErrInvalid for a secret shorter than
// MinBootstrapSecretLen, an empty name or an unknown role.
func (s *Store) EnsureAPIToken(ctx context.Context, name, secret, role string) (created bool, err error) {
	if len(secret) < MinBootstrapSecretLen {
		return false, fmt.Errorf("store: ensure api token: %w: secret shorter than %d characters", ErrInvalid, MinBootstrapSecretLen)
	}
	_, created, err = s.insertAPIToken(ctx, ActorSystem, name, role, secret, secretPreview(secret))
	if err == nil && !created {
		err = s.refreshPreview(ctx, "api_tokens", secret)
	}
	if err != nil {
		return false, fmt.Errorf("store: ensure api token %q: %w", name, err)
	}
	return created, nil
}

func (s *Store) insertAPIToken(ctx context.Context, actor, name, role, secret, preview string) (APIToken, bool, error) {
	if name == "" {
		return APIToken{}, false, fmt.Errorf("%w: name is required", ErrInvalid)
	}
	if !isRole(role) {
		return APIToken{}, false, fmt.Errorf("%w: role must be %q or %q", ErrInvalid, RoleAdmin, RoleViewer)
	}
	var (
		t       APIToken
		created bool
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, insertAPITokenSQL, name, role, hashSecret(secret), preview)
		var err error
		if t, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[APIToken]); err != nil {
			if err = translate(err); err == ErrNotFound { // same secret exists already
				return nil
			}
			return err
		}
		created = true
		return audit(ctx, tx, actor, ActionCreate, EntityAPIToken, t.ID, nil, t)
	})
	return t, created, err
}

const lookupAPITokenSQL = `
UPDATE api_tokens SET last_used_at = now() WHERE secret_hash = $1
RETURNING ` + apiTokenColumns

// LookupAPIToken returns the token whose secret this is and records its use. It
// returns ErrNotFound for an unknown secret.
func (s *Store) LookupAPIToken(ctx context.Context, secret string) (APIToken, error) {
	rows, _ := s.db.Query(ctx, lookupAPITokenSQL, hashSecret(secret))
	t, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[APIToken])
	if err != nil {
		return APIToken{}, fmt.Errorf("store: lookup api token: %w", translate(err))
	}
	return t, nil
}

const listAPITokensSQL = `SELECT ` + apiTokenColumns + ` FROM api_tokens ORDER BY created_at, name`

// ListAPITokens returns every token, oldest first.
func (s *Store) ListAPITokens(ctx context.Context) ([]APIToken, error) {
	rows, _ := s.db.Query(ctx, listAPITokensSQL)
	ts, err := pgx.CollectRows(rows, pgx.RowToStructByName[APIToken])
	if err != nil {
		return nil, fmt.Errorf("store: list api tokens: %w", translate(err))
	}
	return ts, nil
}

const getAPITokenSQL = `SELECT ` + apiTokenColumns + ` FROM api_tokens WHERE id = $1`

// GetAPIToken returns one token (never its secret), or ErrNotFound.
func (s *Store) GetAPIToken(ctx context.Context, id string) (APIToken, error) {
	if err := checkID(id); err != nil {
		return APIToken{}, fmt.Errorf("store: get api token %s: %w", id, err)
	}
	rows, _ := s.db.Query(ctx, getAPITokenSQL, id)
	t, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[APIToken])
	if err != nil {
		return APIToken{}, fmt.Errorf("store: get api token %s: %w", id, translate(err))
	}
	return t, nil
}

const deleteAPITokenSQL = `DELETE FROM api_tokens WHERE id = $1 RETURNING ` + apiTokenColumns

// DeleteAPIToken revokes a token, with an audit row. It returns ErrNotFound.
func (s *Store) DeleteAPIToken(ctx context.Context, actor, id string) error {
	if err := checkID(id); err != nil {
		return fmt.Errorf("store: delete api token %s: %w", id, err)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, deleteAPITokenSQL, id)
		t, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[APIToken])
		if err != nil {
			return translate(err)
		}
		return audit(ctx, tx, actor, ActionDelete, EntityAPIToken, id, t, nil)
	})
	if err != nil {
		return fmt.Errorf("store: delete api token %s: %w", id, err)
	}
	return nil
}
