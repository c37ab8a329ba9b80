package store

import (
	"context"
	"time"
)

// Audit of an operator's stop and resume of a session (entity session, id
// the session's hash).
const (
	EntitySession = "session"
	ActionStop    = "stop"
	ActionResume  = "resume"
)

// SessionAudit is what the audit log keeps of a stopped or resumed session:
// its client key and its state afterwards.
type SessionAudit struct {
	Key     string    `json:"keyId"`
	KeyName string    `json:"keyName"`
	State   string    `json:"state"`
	At      time.Time `json:"lastSeen"`
}

// AuditSession records that actor stopped or resumed (action) session.
func (s *Store) AuditSession(ctx context.Context, actor, action, session string, after SessionAudit) error {
	return audit(ctx, s.db, actor, action, EntitySession, session, nil, after)
}
