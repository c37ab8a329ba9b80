package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Settings is the single row of global settings. Data is the JSON object that
// gateway/limits interprets; the store only requires it to be a JSON object.
type Settings struct {
	Data      json.RawMessage `json:"data" db:"data"`
	Version   int64           `json:"version" db:"version"`
	UpdatedAt time.Time       `json:"updatedAt" db:"updated_at"`
}

const getSettingsSQL = `SELECT data, version, updated_at FROM settings WHERE id = 1`

// GetSettings returns the settings row. It returns ErrNotFound only if the migration
// that creates the row has not run.
func (s *Store) GetSettings(ctx context.Context) (Settings, error) {
	st, err := getSettings(ctx, s.db, getSettingsSQL)
	if err != nil {
		return Settings{}, fmt.Errorf("store: get settings: %w", err)
	}
	return st, nil
}

func getSettings(ctx context.Context, db DB, sql string, args ...any) (Settings, error) {
	rows, _ := db.Query(ctx, sql, args...)
	st, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Settings])
	return st, translate(err)
}

const lockSettingsSQL = getSettingsSQL + ` FOR UPDATE`

const updateSettingsSQL = `
UPDATE settings SET data = $1, version = version + 1, updated_at = now()
WHERE id = 1
RETURNING data, version, updated_at`

// UpdateSettings changes the settings in one transaction: it locks the row, returns
// ErrStale (writing nothing) if expectedVersion is not 0 and differs from the stored
// version, calls fn with the current settings, stores the JSON object fn returns, bumps
// the version, and writes the audit row (before/after: the data objects) and the config
// notification. An error from fn aborts the update and is returned unwrapped.
// ErrInvalid means the data is not a JSON object.
func (s *Store) UpdateSettings(ctx context.Context, actor string, expectedVersion int64,
	fn func(cur Settings) (json.RawMessage, error)) (Settings, error) {
	lock := func(tx pgx.Tx) (Settings, error) { return getSettings(ctx, tx, lockSettingsSQL) }
	return updateLocked(ctx, s, "update settings", expectedVersion, lock, fn,
		func(tx pgx.Tx, cur Settings, data json.RawMessage) (Settings, error) {
			if !json.Valid(data) {
				return Settings{}, fmt.Errorf("%w: settings are not valid JSON", ErrInvalid)
			}
			updated, err := getSettings(ctx, tx, updateSettingsSQL, data)
			if err != nil {
				return Settings{}, err
			}
			if err := audit(ctx, tx, actor, ActionUpdate, EntitySettings, "", auditedSettings(cur.Data), auditedSettings(updated.Data)); err != nil {
				return Settings{}, err
			}
			return updated, notifyConfig(ctx, tx, EntitySettings)
		})
}

// GatewayConnection is a connection with its decrypted upstream key, for the gateway
// only. APIKey is never marshalled.
type GatewayConnection struct {
	Connection
	APIKey string `json:"-"`
}

// GatewayConfig is a consistent snapshot of everything the gateway needs.
type GatewayConfig struct {
	Connections []GatewayConnection
	Settings    Settings
	// ClientKeys are the client keys (never their secrets) of the same
	// snapshot: a key's limits never arrive before the settings written
	// ahead of them.
	ClientKeys []ClientKey
}

// LoadGatewayConfig reads every connection (with decrypted keys), the settings and the
// client keys in one read-only REPEATABLE READ transaction, so the snapshot is
// consistent. It fails if an upstream key cannot be decrypted.
func (s *Store) LoadGatewayConfig(ctx context.Context) (GatewayConfig, error) {
	var cfg GatewayConfig
	load := func(tx pgx.Tx) error {
		conns, err := listConnections(ctx, tx)
		if err != nil {
			return err
		}
		keys, err := s.connectionSecrets(ctx, tx)
		if err != nil {
			return err
		}
		cfg.Connections = make([]GatewayConnection, 0, len(conns))
		for _, c := range conns {
			cfg.Connections = append(cfg.Connections, GatewayConnection{Connection: c, APIKey: keys[c.ID]})
		}
		if cfg.Settings, err = getSettings(ctx, tx, getSettingsSQL); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, listClientKeysSQL)
		cfg.ClientKeys, err = pgx.CollectRows(rows, pgx.RowToStructByName[ClientKey])
		return translate(err)
	}
	var err error
	if b, ok := s.db.(interface {
		BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
	}); ok {
		err = pgx.BeginTxFunc(ctx, b, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, load)
	} else {
		// Already inside the caller's transaction: its snapshot rules apply.
		err = pgx.BeginFunc(ctx, s.db, load)
	}
	if err != nil {
		return GatewayConfig{}, fmt.Errorf("store: load gateway config: %w", err)
	}
	return cfg, nil
}
