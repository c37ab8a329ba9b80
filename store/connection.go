package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Connection is a provider connection as the API shows it: the upstream key itself is
// never part of it, only APIKeyPreview. Its JSON form is the API's and the audit log's.
type Connection struct {
	ID                 string          `json:"id" db:"id"`
	Name               string          `json:"name" db:"name"`
	Provider           string          `json:"provider" db:"provider"`
	APIStyle           string          `json:"apiStyle" db:"api_style"`
	BaseURL            string          `json:"baseUrl" db:"base_url"`
	APIKeyPreview      string          `json:"apiKeyPreview" db:"api_key_preview"`
	Models             []string        `json:"models" db:"models"`
	Priority           int             `json:"priority" db:"priority"`
	Enabled            bool            `json:"enabled" db:"enabled"`
	RateLimitOverrides json.RawMessage `json:"rateLimitOverrides" db:"rate_limit_overrides"`
	Version            int64           `json:"version" db:"version"`
	CreatedAt          time.Time       `json:"createdAt" db:"created_at"`
	UpdatedAt          time.Time       `json:"updatedAt" db:"updated_at"`
}

// ConnectionInput holds the writable fields of a connection. APIKey is required on
// create; on update an empty APIKey keeps the stored key. Nil Models are stored as an
// empty list and empty or null RateLimitOverrides as {}.
type ConnectionInput struct {
	Name               string          `json:"name"`
	Provider           string          `json:"provider"`
	APIStyle           string          `json:"apiStyle"`
	BaseURL            string          `json:"baseUrl"`
	APIKey             string          `json:"apiKey,omitempty"`
	Models             []string        `json:"models"`
	Priority           int             `json:"priority"`
	Enabled            bool            `json:"enabled"`
	RateLimitOverrides json.RawMessage `json:"rateLimitOverrides"`
}

// Input returns c's writable fields, with an empty APIKey (keep the stored key): the
// usual starting point for an update function.
func (c Connection) Input() ConnectionInput {
	return ConnectionInput{
		Name:               c.Name,
		Provider:           c.Provider,
		APIStyle:           c.APIStyle,
		BaseURL:            c.BaseURL,
		Models:             append([]string(nil), c.Models...),
		Priority:           c.Priority,
		Enabled:            c.Enabled,
		RateLimitOverrides: append(json.RawMessage(nil), c.RateLimitOverrides...),
	}
}

// normalized fills in the stored defaults for nil or null values.
func (in ConnectionInput) normalized() ConnectionInput {
	if in.Models == nil {
		in.Models = []string{}
	}
	if t := bytes.TrimSpace(in.RateLimitOverrides); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		in.RateLimitOverrides = json.RawMessage("{}")
	}
	return in
}

func (in ConnectionInput) check() error {
	if !json.Valid(in.RateLimitOverrides) {
		return fmt.Errorf("%w: rateLimitOverrides is not valid JSON", ErrInvalid)
	}
	return nil
}

// connectionColumns is the column list that matches Connection.
const connectionColumns = `id, name, provider, api_style, base_url, api_key_preview, models,
	priority, enabled, rate_limit_overrides, version, created_at, updated_at`

const createConnectionSQL = `
INSERT INTO provider_connections
	(name, provider, api_style, base_url, api_key_enc, api_key_preview, models, priority, enabled, rate_limit_overrides)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
RETURNING ` + connectionColumns

// CreateConnection stores a new connection, its key encrypted, and writes the audit row
// and the config notification in the same transaction. It returns ErrConflict when the
// name is taken and ErrInvalid when the key is empty or a value breaks a table rule.
func (s *Store) CreateConnection(ctx context.Context, actor string, in ConnectionInput) (Connection, error) {
	in = in.normalized()
	if in.APIKey == "" {
		return Connection{}, fmt.Errorf("store: create connection: %w: apiKey is required", ErrInvalid)
	}
	if err := in.check(); err != nil {
		return Connection{}, fmt.Errorf("store: create connection: %w", err)
	}
	var c Connection
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, createConnectionSQL, in.Name, in.Provider, in.APIStyle, in.BaseURL,
			s.seal(in.APIKey), secretPreview(in.APIKey), in.Models, in.Priority, in.Enabled, in.RateLimitOverrides)
		var err error
		if c, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Connection]); err != nil {
			return translate(err)
		}
		if err := audit(ctx, tx, actor, ActionCreate, EntityConnection, c.ID, nil, c); err != nil {
			return err
		}
		return notifyConfig(ctx, tx, EntityConnection+":"+c.ID)
	})
	if err != nil {
		return Connection{}, fmt.Errorf("store: create connection %q: %w", in.Name, err)
	}
	return c, nil
}

const getConnectionSQL = `SELECT ` + connectionColumns + ` FROM provider_connections WHERE id = $1`

// GetConnection returns one connection, or ErrNotFound.
func (s *Store) GetConnection(ctx context.Context, id string) (Connection, error) {
	c, err := s.getConnection(ctx, s.db, getConnectionSQL, id)
	if err != nil {
		return Connection{}, fmt.Errorf("store: get connection %s: %w", id, err)
	}
	return c, nil
}

func (s *Store) getConnection(ctx context.Context, db DB, sql, id string) (Connection, error) {
	if err := checkID(id); err != nil {
		return Connection{}, err
	}
	rows, _ := db.Query(ctx, sql, id)
	c, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Connection])
	return c, translate(err)
}

const listConnectionsSQL = `SELECT ` + connectionColumns + `
FROM provider_connections ORDER BY priority DESC, name`

// ListConnections returns every connection, highest priority first, then by name.
func (s *Store) ListConnections(ctx context.Context) ([]Connection, error) {
	cs, err := listConnections(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("store: list connections: %w", err)
	}
	return cs, nil
}

func listConnections(ctx context.Context, db DB) ([]Connection, error) {
	rows, _ := db.Query(ctx, listConnectionsSQL)
	cs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Connection])
	return cs, translate(err)
}

const lockConnectionSQL = getConnectionSQL + ` FOR UPDATE`

const updateConnectionSQL = `
UPDATE provider_connections SET
	name = $2, provider = $3, api_style = $4, base_url = $5,
	api_key_enc = COALESCE($6, api_key_enc),
	api_key_preview = COALESCE($7, api_key_preview),
	models = $8, priority = $9, enabled = $10, rate_limit_overrides = $11,
	version = version + 1, updated_at = now()
WHERE id = $1
RETURNING ` + connectionColumns

// UpdateConnection changes a connection in one transaction: it locks the row, returns
// ErrStale (writing nothing) if expectedVersion is not 0 and differs from the stored
// version, calls fn with the current row, writes what fn returns (an empty APIKey keeps
// the stored key), bumps the version, and writes the audit row and the config
// notification. An error from fn aborts the update and is returned unwrapped. Other
// errors: ErrNotFound, ErrConflict (name taken), ErrInvalid.
func (s *Store) UpdateConnection(ctx context.Context, actor, id string, expectedVersion int64,
	fn func(cur Connection) (ConnectionInput, error)) (Connection, error) {
	lock := func(tx pgx.Tx) (Connection, error) { return s.getConnection(ctx, tx, lockConnectionSQL, id) }
	return updateLocked(ctx, s, "update connection "+id, expectedVersion, lock, fn,
		func(tx pgx.Tx, cur Connection, in ConnectionInput) (Connection, error) {
			in = in.normalized()
			if err := in.check(); err != nil {
				return Connection{}, err
			}
			var keyEnc, preview any
			if in.APIKey != "" {
				keyEnc, preview = s.seal(in.APIKey), secretPreview(in.APIKey)
			}
			rows, _ := tx.Query(ctx, updateConnectionSQL, id, in.Name, in.Provider, in.APIStyle, in.BaseURL,
				keyEnc, preview, in.Models, in.Priority, in.Enabled, in.RateLimitOverrides)
			updated, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Connection])
			if err != nil {
				return Connection{}, translate(err)
			}
			if err := audit(ctx, tx, actor, ActionUpdate, EntityConnection, id, cur, updated); err != nil {
				return Connection{}, err
			}
			return updated, notifyConfig(ctx, tx, EntityConnection+":"+id)
		})
}

const deleteConnectionSQL = `DELETE FROM provider_connections WHERE id = $1`

// DeleteConnection deletes a connection (and its usage counters) in one transaction
// with its audit row and config notification. It returns ErrNotFound, or ErrStale if
// expectedVersion is not 0 and differs from the stored version.
func (s *Store) DeleteConnection(ctx context.Context, actor, id string, expectedVersion int64) error {
	lock := func(tx pgx.Tx) (Connection, error) { return s.getConnection(ctx, tx, lockConnectionSQL, id) }
	return deleteLocked(ctx, s, "delete connection "+id, actor, EntityConnection, id, expectedVersion, lock, deleteConnectionSQL)
}

const connectionSecretsSQL = `SELECT id, api_key_enc FROM provider_connections`

// ConnectionSecrets returns every connection's decrypted upstream key by connection id.
// Only the gateway's config loader should call it. It fails if a key cannot be
// decrypted (typically: GATEHOUSE_SECRET_KEY changed).
func (s *Store) ConnectionSecrets(ctx context.Context) (map[string]string, error) {
	m, err := s.connectionSecrets(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("store: connection secrets: %w", err)
	}
	return m, nil
}

func (s *Store) connectionSecrets(ctx context.Context, db DB) (map[string]string, error) {
	rows, _ := db.Query(ctx, connectionSecretsSQL)
	m := map[string]string{}
	var (
		id     string
		sealed []byte
	)
	_, err := pgx.ForEachRow(rows, []any{&id, &sealed}, func() error {
		key, err := s.open(sealed)
		if err != nil {
			return fmt.Errorf("connection %s: %w", id, err)
		}
		m[id] = key
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	return m, nil
}
