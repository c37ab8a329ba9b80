package ui

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// throttledAuditEvery spaces the audit rows of refused (429) sign-ins from one
// client address: a guesser past its allowance writes one row a minute, not one per
// attempt.
const throttledAuditEvery = time.Minute

// throttledAudits remembers when each client address last had a refused sign-in
// audited. Its memory is bounded: past maxThrottledAudits addresses it starts over.
type throttledAudits struct {
	mu   sync.Mutex
	last map[string]time.Time
}

const maxThrottledAudits = 10000

// allow reports whether a refused sign-in from addr at now is audited.
func (a *throttledAudits) allow(addr string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.last[addr]; ok && now.Sub(t) < throttledAuditEvery && !now.Before(t) {
		return false
	}
	if a.last == nil || len(a.last) >= maxThrottledAudits {
		a.last = map[string]time.Time{}
	}
	a.last[addr] = now
	return true
}

// auditSignIn writes a sign-in attempt to the audit log. A write that fails is
// logged, never in the way of the sign-in.
func (s *Server) auditSignIn(ctx context.Context, action, email, userID, addr string) {
	err := s.store.AuditSignIn(context.WithoutCancel(ctx), store.SignIn{Action: action, Email: email, UserID: userID, Address: addr})
	if err != nil {
		s.log.WarnContext(ctx, "dashboard: audit a sign-in", slog.String("action", action), slog.Any("error", err))
	}
}
