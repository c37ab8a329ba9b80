package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

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

	// Dashboard sign-ins (entity user): a good password, a bad one (or an unknown
	// account), and an attempt refused by the throttle (429).
	ActionSignIn          = "sign_in"
	ActionSignInFailed    = "sign_in_failed"
	ActionSignInThrottled = "sign_in_throttled"
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
  AND ($5::text = '' OR actor = $5::text OR actor = 'user:' || $5::text)
  AND ($6::text = '' OR action = $6::text)
  AND ($7::timestamptz IS NULL OR created_at >= $7::timestamptz)
  AND ($8::timestamptz IS NULL OR created_at < $8::timestamptz)
  AND (NOT $9::bool OR action <> '` + ActionTest + `')
ORDER BY id DESC
LIMIT $2`

// AuditFilter narrows ListAuditFor. Empty fields match everything.
type AuditFilter struct {
	Entity   string
	EntityID string
	// Actor is an actor as recorded ("token:ci", "system") or a dashboard user's
	// email (matching "user:<email>").
	Actor  string
	Action string
	// Since and Until bound created_at (since inclusive, until exclusive); zero is open.
	Since, Until time.Time
	// Changes keeps only the entries that changed the entity: a connection
	// test (ActionTest) is audited but changes nothing.
	Changes bool
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
	rows, _ := s.db.Query(ctx, listAuditSQL, beforeID, limit, f.Entity, f.EntityID, f.Actor, f.Action,
		nullTime(f.Since), nullTime(f.Until), f.Changes)
	entries, err := pgx.CollectRows(rows, pgx.RowToStructByName[AuditEntry])
	if err != nil {
		return nil, fmt.Errorf("store: list audit: %w", translate(err))
	}
	return entries, nil
}

// nullTime is t for a query, or SQL NULL when t is zero.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// SignIn is one dashboard sign-in attempt for the audit log.
type SignIn struct {
	// Action is ActionSignIn, ActionSignInFailed or ActionSignInThrottled.
	Action string
	// Email is the address as typed: the actor is "user:<email>" (the account the
	// attempt claims; cleaned of invalid UTF-8 and control characters, at most 254
	// characters). Never the password.
	Email string
	// UserID is the account's id after a good password, "" otherwise.
	UserID string
	// Address is the client address (GATEHOUSE_TRUSTED_PROXIES rules).
	Address string
}

// AuditSignIn writes one sign-in attempt to the audit log: actor "user:<email>",
// entity user, and the address in after.
func (s *Store) AuditSignIn(ctx context.Context, in SignIn) error {
	email := cleanEmail(in.Email)
	after := map[string]string{"email": email, "address": in.Address}
	return audit(ctx, s.db, "user:"+email, in.Action, EntityUser, in.UserID, nil, after)
}

// cleanEmail makes a typed e-mail safe to store as text: invalid UTF-8 replaced,
// control characters (NUL among them) dropped, cut to 254 characters.
func cleanEmail(e string) string {
	e = strings.ToValidUTF8(e, "\uFFFD")
	e = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, e)
	if r := []rune(e); len(r) > 254 {
		e = string(r[:254])
	}
	return e
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
