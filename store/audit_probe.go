package store

import "context"

// ActionTest is a connection test from the dashboard: one tiny request sent
// through the gateway to the connection (entity connection).
const ActionTest = "test"

// ConnectionTest is what the audit log keeps of a connection test: the model asked
// and what came back (never the answer's text), or why nothing was sent.
type ConnectionTest struct {
	Model     string `json:"model,omitempty"`
	Status    int    `json:"status,omitempty"`
	Code      string `json:"code,omitempty"`
	LatencyMs int64  `json:"latencyMs,omitempty"`
	NotSent   string `json:"notSent,omitempty"`
}

// AuditConnectionTest writes one connection test by actor to the audit log.
func (s *Store) AuditConnectionTest(ctx context.Context, actor, connectionID string, t ConnectionTest) error {
	return audit(ctx, s.db, actor, ActionTest, EntityConnection, connectionID, nil, t)
}
