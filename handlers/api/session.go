package handlers

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/store"
)

// SessionSource is what the handlers need of the gateway's runaway guards:
// the sessions it served lately, and an operator's stop and resume. Each
// replica knows the sessions it served.
type SessionSource interface {
	// ListSessions returns the sessions active within the last 15 minutes,
	// most recent first.
	ListSessions() []session.Info
	// GetSession, StopSession and ResumeSession report false for a session
	// the gateway does not know.
	GetSession(id string) (session.Info, bool)
	StopSession(id string) (session.Info, bool)
	ResumeSession(id string) (session.Info, bool)
}

// sessionJSON is a session as /api/v1/sessions shows it: its figures, the
// cost in US dollars, and its state (ok, looping, over budget, stopped).
type sessionJSON struct {
	session.Info
	CacheHitRatio float64 `json:"cacheHitRatio"`
	CostUSD       float64 `json:"costUsd"`
	SpentUSD      float64 `json:"budgetSpentUsd"`
}

func newSessionJSON(in session.Info) sessionJSON {
	return sessionJSON{Info: in, CacheHitRatio: in.CacheHitRatio(), CostUSD: microsToUSD(in.CostMicros), SpentUSD: microsToUSD(in.SpentMicros)}
}

// sessionFilter narrows the list by key id and state (both optional).
func sessionFilter(items []session.Info, key, state string) []session.Info {
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

// sessionStates are the states a session may be in, for the state filter.
var sessionStates = []string{"ok", "looping", "over budget", "stopped"}

// listSessions serves GET /api/v1/sessions: the sessions active within the
// last 15 minutes, most recent first; key= (a client key id) and state=
// filter them.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	state := q.Get("state")
	if state != "" && !slices.Contains(sessionStates, state) {
		return &apiError{status: http.StatusBadRequest, detail: "invalid query parameters",
			fields: limits.FieldErrors{fieldError("state", limits.CodeOneOf, strings.Join(sessionStates, ", "))}}
	}
	page := list[sessionJSON]{Items: []sessionJSON{}}
	if s.deps.Sessions != nil {
		for _, in := range sessionFilter(s.deps.Sessions.ListSessions(), q.Get("key"), state) {
			page.Items = append(page.Items, newSessionJSON(in))
		}
	}
	return writeJSON(w, http.StatusOK, page, "")
}

// getSession serves GET /api/v1/sessions/{session}.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	if s.deps.Sessions == nil {
		return errNoSession
	}
	in, ok := s.deps.Sessions.GetSession(r.PathValue("session"))
	if !ok {
		return errNoSession
	}
	return writeJSON(w, http.StatusOK, newSessionJSON(in), "")
}

var errNoSession = newAPIError(http.StatusNotFound, "no such session on this replica (sessions idle for 15 minutes are forgotten)")

// stopSession serves POST /api/v1/sessions/{session}/stop (admin, audited).
func (s *Server) stopSession(w http.ResponseWriter, r *http.Request) error {
	return s.setSession(w, r, actor(r), store.ActionStop)
}

// resumeSession serves POST /api/v1/sessions/{session}/resume (admin, audited).
func (s *Server) resumeSession(w http.ResponseWriter, r *http.Request) error {
	return s.setSession(w, r, actor(r), store.ActionResume)
}

// setSession stops or resumes a session, audits it as who, and answers
// the session as it is now.
func (s *Server) setSession(w http.ResponseWriter, r *http.Request, who, action string) error {
	in, err := s.applySession(r.Context(), r.PathValue("session"), who, action)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, newSessionJSON(in), "")
}

// applySession stops or resumes session id and audits it.
func (s *Server) applySession(ctx context.Context, id, who, action string) (session.Info, error) {
	if s.deps.Sessions == nil {
		return session.Info{}, errNoSession
	}
	set := s.deps.Sessions.StopSession
	if action == store.ActionResume {
		set = s.deps.Sessions.ResumeSession
	}
	in, ok := set(id)
	if !ok {
		return session.Info{}, errNoSession
	}
	err := s.store.AuditSession(context.WithoutCancel(ctx), who, action, id, store.SessionAudit{
		Key: in.KeyID, KeyName: in.KeyName, State: in.State, At: in.LastSeen.UTC().Truncate(time.Millisecond)})
	return in, err
}
