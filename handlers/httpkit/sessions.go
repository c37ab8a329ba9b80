package httpkit

import (
	"context"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/store"
)

// SessionFilter narrows the list by key id and state (both optional).
func SessionFilter(items []session.Info, key, state string) []session.Info {
	if key == "" && state == "" {
		return items
	}
	out := items[:0:0]
	for _, in := range items {
		if (key == "" || in.KeyID == key) && (state == "" || in.State == state) {
			out = append(out, in)
		}
	}
	return out
}

// SessionStates are the states a session may be in, for the state filter.
var SessionStates = []string{"ok", "looping", "over budget", "stopped"}

var ErrNoSession = NewAPIError(http.StatusNotFound, "no such session on this replica (sessions idle for 15 minutes are forgotten)")

// ApplySession stops or resumes session id and audits it.
func (s *Core) ApplySession(ctx context.Context, id, who, action string) (session.Info, error) {
	if s.deps.Sessions == nil {
		return session.Info{}, ErrNoSession
	}
	set := s.deps.Sessions.StopSession
	if action == store.ActionResume {
		set = s.deps.Sessions.ResumeSession
	}
	in, ok := set(id)
	if !ok {
		return session.Info{}, ErrNoSession
	}
	err := s.store.AuditSession(context.WithoutCancel(ctx), who, action, id, store.SessionAudit{
		Key: in.KeyID, KeyName: in.KeyName, State: in.State, At: in.LastSeen.UTC().Truncate(time.Millisecond)})
	return in, err
}
