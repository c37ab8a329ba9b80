package store

import (
	"context"
	"fmt"
	"time"
)

// Sessions back the dashboard's server-side session store. The store sees only a hash
// of the session id (the cookie holds the id itself) and opaque data.

const saveSessionSQL = `
INSERT INTO sessions (id_hash, user_id, data, expires_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (id_hash) DO UPDATE
SET user_id = EXCLUDED.user_id, data = EXCLUDED.data, expires_at = EXCLUDED.expires_at`

// SaveSession creates or replaces the session with that id hash. userID may be empty
// (an anonymous session, e.g. one holding only a flash message). It returns ErrNotFound
// if userID names no user (for instance one deleted meanwhile).
func (s *Store) SaveSession(ctx context.Context, idHash []byte, userID string, data []byte, expires time.Time) error {
	var uid any
	if userID != "" {
		if err := checkID(userID); err != nil {
			return fmt.Errorf("store: save session: user: %w", err)
		}
		uid = userID
	}
	if data == nil {
		data = []byte{}
	}
	if _, err := s.db.Exec(ctx, saveSessionSQL, idHash, uid, data, expires); err != nil {
		return fmt.Errorf("store: save session: %w", translate(err))
	}
	return nil
}

const loadSessionSQL = `
SELECT data, COALESCE(user_id::text, '') FROM sessions
WHERE id_hash = $1 AND expires_at > now()`

// LoadSession returns a session's data and user id (empty for an anonymous session).
// It returns ErrNotFound for an unknown or expired session.
func (s *Store) LoadSession(ctx context.Context, idHash []byte) (data []byte, userID string, err error) {
	if err := s.db.QueryRow(ctx, loadSessionSQL, idHash).Scan(&data, &userID); err != nil {
		return nil, "", fmt.Errorf("store: load session: %w", translate(err))
	}
	return data, userID, nil
}

const deleteSessionSQL = `DELETE FROM sessions WHERE id_hash = $1`

// DeleteSession deletes one session; deleting an unknown session is not an error.
func (s *Store) DeleteSession(ctx context.Context, idHash []byte) error {
	if _, err := s.db.Exec(ctx, deleteSessionSQL, idHash); err != nil {
		return fmt.Errorf("store: delete session: %w", translate(err))
	}
	return nil
}

const deleteUserSessionsSQL = `DELETE FROM sessions WHERE user_id = $1`

// DeleteUserSessions ends every session of a user (sign out everywhere). An id that is
// not a uuid matches no session.
func (s *Store) DeleteUserSessions(ctx context.Context, userID string) error {
	if !isUUID(userID) {
		return nil
	}
	if _, err := s.db.Exec(ctx, deleteUserSessionsSQL, userID); err != nil {
		return fmt.Errorf("store: delete sessions of user %s: %w", userID, translate(err))
	}
	return nil
}

const deleteExpiredSessionsSQL = `DELETE FROM sessions WHERE expires_at <= now()`

// DeleteExpiredSessions removes expired sessions and reports how many it removed.
func (s *Store) DeleteExpiredSessions(ctx context.Context) (int64, error) {
	tag, err := s.db.Exec(ctx, deleteExpiredSessionsSQL)
	if err != nil {
		return 0, fmt.Errorf("store: delete expired sessions: %w", translate(err))
	}
	return tag.RowsAffected(), nil
}
