package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ConfigState is the stored configuration as a declarative document sees it: the
// settings, every connection and every client key, read under row locks inside
// ApplyConfig so nothing changes between the comparison and the writes.
type ConfigState struct {
	Settings Settings
	// Connections are sorted by name.
	Connections []Connection
	// ClientKeys are sorted by name (names are unique).
	ClientKeys []ClientKey
}

// DesiredConfig is what a configuration document asks for. A part the document does
// not declare (nil Settings, a false Declares… flag) is left as it is.
type DesiredConfig struct {
	// Settings is the settings data object to store; nil leaves the settings alone.
	// It is compared with the stored object as JSON, so an equal object writes nothing.
	Settings json.RawMessage
	// Connections are the connections the document names, each by its unique name. An
	// empty APIKey keeps the stored key of an existing connection.
	Connections         []ConnectionInput
	DeclaresConnections bool
	// ClientKeys are the client keys the document names, each by its unique name: a
	// name with no key is created (with a new secret), a key whose enabled or limits
	// differ is updated (its secret stays).
	ClientKeys         []ClientKeyInput
	DeclaresClientKeys bool
	// Prune deletes the connections and client keys of a declared list it does not name.
	Prune bool
}

// ConfigChange is one entity ApplyConfig changes (or, in a dry run, would change).
type ConfigChange struct {
	// Entity is EntitySettings, EntityConnection or EntityClientKey; Action is
	// ActionCreate, ActionUpdate or ActionDelete.
	Entity string
	Action string
	// ID is the entity's id: "" for the settings and for a creation in a dry run.
	ID   string
	Name string
	// Before and After are the entity as the API and the audit log show it (the
	// settings: their data object); Before is nil for a creation, After for a deletion.
	// In a dry run After is what the write would store, with the version unchanged.
	Before, After any
	// KeyChanged reports that a connection's upstream key changes, which its preview
	// may not show.
	KeyChanged bool
	// Secret is a created client key's secret, set only when the change was applied:
	// the one time it is shown.
	Secret string
}

// errDryRun rolls back the transaction of a dry run.
var errDryRun = errors.New("store: dry run")

const (
	configConnectionsSQL = `SELECT ` + connectionColumns + ` FROM provider_connections ORDER BY name`
	configClientKeysSQL  = `SELECT ` + clientKeyColumns + ` FROM client_keys ORDER BY name`
)

// ReadConfig returns the stored configuration in one consistent snapshot (a read-only
// REPEATABLE READ transaction), for an export.
func (s *Store) ReadConfig(ctx context.Context) (ConfigState, error) {
	var cur ConfigState
	read := func(tx pgx.Tx) error {
		var err error
		cur, err = readConfig(ctx, tx, "")
		return err
	}
	var err error
	if b, ok := s.db.(interface {
		BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
	}); ok {
		err = pgx.BeginTxFunc(ctx, b, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, read)
	} else {
		err = pgx.BeginFunc(ctx, s.db, read)
	}
	if err != nil {
		return ConfigState{}, fmt.Errorf("store: read config: %w", err)
	}
	return cur, nil
}

// readConfig reads the settings, connections and client keys on tx; lock is "" or
// " FOR UPDATE".
func readConfig(ctx context.Context, tx pgx.Tx, lock string) (ConfigState, error) {
	var cur ConfigState
	var err error
	if cur.Settings, err = getSettings(ctx, tx, getSettingsSQL+lock); err != nil {
		return ConfigState{}, err
	}
	rows, _ := tx.Query(ctx, configConnectionsSQL+lock)
	if cur.Connections, err = pgx.CollectRows(rows, pgx.RowToStructByName[Connection]); err != nil {
		return ConfigState{}, translate(err)
	}
	rows, _ = tx.Query(ctx, configClientKeysSQL+lock)
	if cur.ClientKeys, err = pgx.CollectRows(rows, pgx.RowToStructByName[ClientKey]); err != nil {
		return ConfigState{}, translate(err)
	}
	return cur, nil
}

// ApplyConfig brings the stored configuration to what fn asks for, in one transaction:
// it locks the settings row, every connection and every client key, calls fn with them
// (an error from fn aborts everything and is returned unwrapped), compares, and writes
// every change with one audit row per changed entity (actor as given) and, when
// anything changed, one config notification. Nothing that is equal is written, so
// applying what is stored bumps no version and writes no audit row. With dryRun it
// writes nothing and returns what it would change. Changes are listed settings first,
// then connections and client keys by name. Errors: ErrConflict (a name taken by a
// concurrent write), ErrInvalid, ErrUnavailable.
func (s *Store) ApplyConfig(ctx context.Context, actor string, dryRun bool,
	fn func(cur ConfigState) (DesiredConfig, error)) ([]ConfigChange, error) {
	var (
		changes []ConfigChange
		fnErr   error
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		changes = nil
		cur, keys, err := s.lockConfig(ctx, tx)
		if err != nil {
			return err
		}
		want, err := fn(cur)
		if err != nil {
			fnErr = err
			return err
		}
		changes, err = s.planConfig(cur, keys, want)
		if err != nil {
			return err
		}
		if dryRun {
			return errDryRun
		}
		for i := range changes {
			if err := s.writeChange(ctx, tx, actor, &changes[i], want); err != nil {
				return err
			}
		}
		if len(changes) == 0 {
			return nil
		}
		return notifyConfig(ctx, tx, "config")
	})
	switch {
	case fnErr != nil:
		return nil, fnErr
	case errors.Is(err, errDryRun):
		return changes, nil
	case err != nil:
		return nil, fmt.Errorf("store: apply config: %w", err)
	}
	return changes, nil
}

// lockConfig reads and locks everything a configuration document covers, with the
// decrypted upstream keys by connection id.
func (s *Store) lockConfig(ctx context.Context, tx pgx.Tx) (ConfigState, map[string]string, error) {
	cur, err := readConfig(ctx, tx, " FOR UPDATE")
	if err != nil {
		return ConfigState{}, nil, err
	}
	keys, err := s.connectionSecrets(ctx, tx)
	if err != nil {
		return ConfigState{}, nil, err
	}
	return cur, keys, nil
}

// planConfig lists the changes that take cur to want. keys are the stored upstream keys
// by connection id, so a key given again unchanged is no change.
func (s *Store) planConfig(cur ConfigState, keys map[string]string, want DesiredConfig) ([]ConfigChange, error) {
	var changes []ConfigChange
	if want.Settings != nil {
		if !json.Valid(want.Settings) {
			return nil, fmt.Errorf("%w: settings are not valid JSON", ErrInvalid)
		}
		if !jsonEqual(cur.Settings.Data, want.Settings) {
			changes = append(changes, ConfigChange{Entity: EntitySettings, Action: ActionUpdate,
				Before: auditedSettings(cur.Settings.Data), After: auditedSettings(want.Settings)})
		}
	}

	var conns []ConfigChange
	if want.DeclaresConnections {
		byName := map[string]Connection{}
		for _, c := range cur.Connections {
			byName[c.Name] = c
		}
		named := map[string]bool{}
		for _, in := range want.Connections {
			in = in.normalized()
			if err := in.check(); err != nil {
				return nil, err
			}
			if named[in.Name] {
				return nil, fmt.Errorf("%w: connection %q is named twice", ErrInvalid, in.Name)
			}
			named[in.Name] = true
			c, ok := byName[in.Name]
			if !ok {
				if in.APIKey == "" {
					return nil, fmt.Errorf("%w: connection %q: apiKey is required", ErrInvalid, in.Name)
				}
				after := connectionFrom(Connection{}, in)
				conns = append(conns, ConfigChange{Entity: EntityConnection, Action: ActionCreate,
					Name: in.Name, After: after})
				continue
			}
			keyChanged := in.APIKey != "" && in.APIKey != keys[c.ID]
			if !keyChanged && sameConnection(c, in) {
				continue
			}
			after := connectionFrom(c, in)
			if keyChanged {
				after.APIKeyPreview = secretPreview(in.APIKey)
			}
			conns = append(conns, ConfigChange{Entity: EntityConnection, Action: ActionUpdate,
				ID: c.ID, Name: c.Name, Before: c, After: after, KeyChanged: keyChanged})
		}
		if want.Prune {
			for _, c := range cur.Connections {
				if !named[c.Name] {
					conns = append(conns, ConfigChange{Entity: EntityConnection, Action: ActionDelete,
						ID: c.ID, Name: c.Name, Before: c})
				}
			}
		}
	}

	var ckeys []ConfigChange
	if want.DeclaresClientKeys {
		have := map[string]ClientKey{}
		for _, k := range cur.ClientKeys {
			have[k.Name] = k
		}
		named := map[string]bool{}
		for _, in := range want.ClientKeys {
			in = in.normalized()
			if err := in.check(); err != nil {
				return nil, err
			}
			if named[in.Name] {
				return nil, fmt.Errorf("%w: client key %q is named twice", ErrInvalid, in.Name)
			}
			named[in.Name] = true
			k, ok := have[in.Name]
			switch {
			case !ok:
				ckeys = append(ckeys, ConfigChange{Entity: EntityClientKey, Action: ActionCreate,
					Name: in.Name, After: clientKeyFrom(ClientKey{}, in)})
			case k.Enabled != in.Enabled || !jsonEqual(k.Limits, in.Limits):
				ckeys = append(ckeys, ConfigChange{Entity: EntityClientKey, Action: ActionUpdate,
					ID: k.ID, Name: k.Name, Before: k, After: clientKeyFrom(k, in)})
			}
		}
		if want.Prune {
			for _, k := range cur.ClientKeys {
				if !named[k.Name] {
					ckeys = append(ckeys, ConfigChange{Entity: EntityClientKey, Action: ActionDelete,
						ID: k.ID, Name: k.Name, Before: k})
				}
			}
		}
	}
	byName := func(a, b ConfigChange) int { return strings.Compare(a.Name, b.Name) }
	slices.SortStableFunc(conns, byName)
	slices.SortStableFunc(ckeys, byName)
	return append(append(changes, conns...), ckeys...), nil
}

// writeChange writes one planned change with its audit row, filling in what the
// database returns (ids, versions, a client key's secret).
func (s *Store) writeChange(ctx context.Context, tx pgx.Tx, actor string, ch *ConfigChange, want DesiredConfig) error {
	switch ch.Entity + "/" + ch.Action {
	case EntitySettings + "/" + ActionUpdate:
		updated, err := getSettings(ctx, tx, updateSettingsSQL, want.Settings)
		if err != nil {
			return err
		}
		ch.After = auditedSettings(updated.Data)
		return audit(ctx, tx, actor, ActionUpdate, EntitySettings, "", ch.Before, ch.After)

	case EntityConnection + "/" + ActionCreate, EntityConnection + "/" + ActionUpdate:
		in := desiredConnection(want, ch.Name).normalized()
		var (
			rows pgx.Rows
			c    Connection
			err  error
		)
		if ch.Action == ActionCreate {
			rows, _ = tx.Query(ctx, createConnectionSQL, in.Name, in.Provider, in.APIStyle, in.BaseURL,
				s.seal(in.APIKey), secretPreview(in.APIKey), in.Models, in.Priority, in.Enabled, in.RateLimitOverrides)
		} else {
			var keyEnc, preview any
			if ch.KeyChanged {
				keyEnc, preview = s.seal(in.APIKey), secretPreview(in.APIKey)
			}
			rows, _ = tx.Query(ctx, updateConnectionSQL, ch.ID, in.Name, in.Provider, in.APIStyle, in.BaseURL,
				keyEnc, preview, in.Models, in.Priority, in.Enabled, in.RateLimitOverrides)
		}
		if c, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Connection]); err != nil {
			return translate(err)
		}
		ch.ID, ch.After = c.ID, c
		var before any
		if ch.Action == ActionUpdate {
			before = ch.Before
		}
		return audit(ctx, tx, actor, ch.Action, EntityConnection, c.ID, before, c)

	case EntityConnection + "/" + ActionDelete:
		if _, err := tx.Exec(ctx, deleteConnectionSQL, ch.ID); err != nil {
			return translate(err)
		}
		return audit(ctx, tx, actor, ActionDelete, EntityConnection, ch.ID, ch.Before, nil)

	case EntityClientKey + "/" + ActionCreate:
		in := desiredClientKey(want, ch.Name).normalized()
		secret := newSecret(ClientKeyPrefix)
		rows, _ := tx.Query(ctx, insertClientKeySQL, in.Name, hashSecret(secret), secretPreview(secret),
			in.Enabled, in.Limits)
		k, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ClientKey])
		if err != nil {
			if err = translate(err); errors.Is(err, ErrNotFound) {
				err = fmt.Errorf("%w: secret collision", ErrConflict) // 256 random bits: not in practice
			}
			return err
		}
		ch.ID, ch.After, ch.Secret = k.ID, k, secret
		return audit(ctx, tx, actor, ActionCreate, EntityClientKey, k.ID, nil, k)

	case EntityClientKey + "/" + ActionUpdate:
		in := desiredClientKey(want, ch.Name).normalized()
		rows, _ := tx.Query(ctx, updateClientKeySQL, ch.ID, in.Name, in.Enabled, in.Limits)
		k, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[ClientKey])
		if err != nil {
			return translate(err)
		}
		ch.After = k
		return audit(ctx, tx, actor, ActionUpdate, EntityClientKey, k.ID, ch.Before, k)

	case EntityClientKey + "/" + ActionDelete:
		if _, err := tx.Exec(ctx, deleteClientKeySQL, ch.ID); err != nil {
			return translate(err)
		}
		return audit(ctx, tx, actor, ActionDelete, EntityClientKey, ch.ID, ch.Before, nil)
	}
	return fmt.Errorf("store: apply config: unknown change %s %s", ch.Action, ch.Entity)
}

// desiredConnection returns the connection of want named name (planConfig found it).
func desiredConnection(want DesiredConfig, name string) ConnectionInput {
	for _, in := range want.Connections {
		if in.Name == name {
			return in
		}
	}
	return ConnectionInput{}
}

// desiredClientKey returns the client key of want named name (planConfig found it).
func desiredClientKey(want DesiredConfig, name string) ClientKeyInput {
	for _, in := range want.ClientKeys {
		if in.Name == name {
			return in
		}
	}
	return ClientKeyInput{}
}

// clientKeyFrom is k with the writable fields of in (in normalized), for a plan's After.
func clientKeyFrom(k ClientKey, in ClientKeyInput) ClientKey {
	k.Name, k.Enabled = in.Name, in.Enabled
	k.Limits = append(json.RawMessage(nil), in.Limits...)
	return k
}

// connectionFrom is c with the writable fields of in (in normalized), for a plan's
// After.
func connectionFrom(c Connection, in ConnectionInput) Connection {
	c.Name, c.Provider, c.APIStyle, c.BaseURL = in.Name, in.Provider, in.APIStyle, in.BaseURL
	c.Models = append([]string{}, in.Models...)
	c.Priority, c.Enabled = in.Priority, in.Enabled
	c.RateLimitOverrides = append(json.RawMessage(nil), in.RateLimitOverrides...)
	if c.ID == "" {
		c.APIKeyPreview = secretPreview(in.APIKey)
	}
	return c
}

// sameConnection reports whether storing in (normalized) would leave c's writable
// fields as they are; the upstream key is compared by the caller.
func sameConnection(c Connection, in ConnectionInput) bool {
	return c.Name == in.Name && c.Provider == in.Provider && c.APIStyle == in.APIStyle &&
		c.BaseURL == in.BaseURL && slices.Equal(c.Models, in.Models) && c.Priority == in.Priority &&
		c.Enabled == in.Enabled && jsonEqual(c.RateLimitOverrides, in.RateLimitOverrides)
}

// jsonEqual reports whether two JSON documents hold the same value: object key order
// and spacing do not matter, numbers compare by their text (Postgres stores them
// canonically and the handlers marshal them from integers).
func jsonEqual(a, b []byte) bool {
	va, okA := decodeAny(a)
	vb, okB := decodeAny(b)
	return okA && okB && reflect.DeepEqual(va, vb)
}

func decodeAny(doc []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}
