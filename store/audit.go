package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Audit entities and actions written by the store.
const (
	EntityConnection = "connection"
	EntitySettings   = "settings"
	EntityUser       = "user"
	EntityAPIToken   = "api_token"
	EntityClientKey  = "client_key"

	ActionCreate      = "create"
	ActionUpdate      = "update"
	ActionDelete      = "delete"
	ActionSetPassword = "set_password"
	ActionSetRole     = "set_role"
)

// ActorSystem is the actor recorded for writes made by Gatehouse itself (bootstrap
// tokens and keys, the demo admin).
const ActorSystem = "system"

// AuditEntry is one row of the audit log. Before and After hold the entity as the API
// shows it (never a secret); Before is nil for creations and After for deletions.
type AuditEntry struct {
	ID        int64           `json:"id" db:"id"`
	Actor     string          `json:"actor" db:"actor"`
	Action    string          `json:"action" db:"action"`
	Entity    string          `json:"entity" db:"entity"`
	EntityID  string          `json:"entityId" db:"entity_id"`
	Before    json.RawMessage `json:"before,omitempty" db:"before"`
	After     json.RawMessage `json:"after,omitempty" db:"after"`
	CreatedAt time.Time       `json:"createdAt" db:"created_at"`
}

// Audit page sizes.
const (
	DefaultAuditLimit = 50
	MaxAuditLimit     = 500
)

const listAuditSQL = `
SELECT id, actor, action, entity, entity_id, before, after, created_at
FROM audit_log
WHERE ($1::bigint = 0 OR id < $1::bigint)
  AND ($3::text = '' OR entity = $3::text)
  AND ($4::text = '' OR entity_id = $4::text)
ORDER BY id DESC
LIMIT $2`

// AuditFilter narrows ListAuditFor to one kind of entity and, optionally, one entity.
// Empty fields match everything.
type AuditFilter struct {
	Entity   string
	EntityID string
}

// ListAudit returns up to limit entries, newest first, with ids below beforeID
// (0 = start from the newest). To page on, pass the last entry's ID as beforeID.
// limit ≤ 0 means DefaultAuditLimit; it is capped at MaxAuditLimit.
func (s *Store) ListAudit(ctx context.Context, beforeID int64, limit int) ([]AuditEntry, error) {
	return s.ListAuditFor(ctx, AuditFilter{}, beforeID, limit)
}

// ListAuditFor is ListAudit narrowed by f, in the database (indexed on entity and
// entity id), so "who changed this connection last" reads one row.
func (s *Store) ListAuditFor(ctx context.Context, f AuditFilter, beforeID int64, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = DefaultAuditLimit
	}
	limit = min(limit, MaxAuditLimit)
	rows, _ := s.db.Query(ctx, listAuditSQL, beforeID, limit, f.Entity, f.EntityID)
	entries, err := pgx.CollectRows(rows, pgx.RowToStructByName[AuditEntry])
	if err != nil {
		return nil, fmt.Errorf("store: list audit: %w", translate(err))
	}
	return entries, nil
}

const insertAuditSQL = `
INSERT INTO audit_log (actor, action, entity, entity_id, before, after)
VALUES ($1, $2, $3, $4, $5, $6)`

// audit writes one audit row on db (the caller's transaction). before and after are
// marshalled to JSON; nil means SQL NULL.
func audit(ctx context.Context, db DB, actor, action, entity, entityID string, before, after any) error {
	b, err := auditJSON(before)
	if err != nil {
		return err
	}
	a, err := auditJSON(after)
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, insertAuditSQL, actor, action, entity, entityID, b, a); err != nil {
		return fmt.Errorf("store: write audit: %w", translate(err))
	}
	return nil
}

func auditJSON(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("store: marshal audit: %w", err)
	}
	return json.RawMessage(b), nil
}
