package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/store"
)

// sessionJSON is a session as /api/v1/sessions shows it: its figures, the
// cost in US dollars, and its state (ok, looping, over budget, stopped).
type sessionJSON struct {
	session.Info
	CacheHitRatio float64 `json:"cacheHitRatio"`
	CostUSD       float64 `json:"costUsd"`
	SpentUSD      float64 `json:"budgetSpentUsd"`
}

func newSessionJSON(in session.Info) sessionJSON {
	return sessionJSON{Info: in, CacheHitRatio: in.CacheHitRatio(), CostUSD: httpkit.MicrosToUSD(in.CostMicros), SpentUSD: httpkit.MicrosToUSD(in.SpentMicros)}
}

// ListSessions serves GET /api/v1/sessions: the sessions active within the
// last 15 minutes, most recent first; key= (a client key id) and state=
// filter them.
func (s *Server) ListSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	state := q.Get("state")
	if state != "" && !slices.Contains(httpkit.SessionStates, state) {
		return &httpkit.APIError{Status: http.StatusBadRequest, Detail: "invalid query parameters",
			Fields: limits.FieldErrors{httpkit.FieldError("state", limits.CodeOneOf, strings.Join(httpkit.SessionStates, ", "))}}
	}
	page := list[sessionJSON]{Items: []sessionJSON{}}
	if s.deps.Sessions != nil {
		for _, in := range httpkit.SessionFilter(s.deps.Sessions.ListSessions(), q.Get("key"), state) {
			page.Items = append(page.Items, newSessionJSON(in))
		}
	}
	return httpkit.WriteJSON(w, http.StatusOK, page, "")
}

// GetSession serves GET /api/v1/sessions/{session}.
func (s *Server) GetSession(w http.ResponseWriter, r *http.Request) error {
	if s.deps.Sessions == nil {
		return httpkit.ErrNoSession
	}
	in, ok := s.deps.Sessions.GetSession(r.PathValue("session"))
	if !ok {
		return httpkit.ErrNoSession
	}
	return httpkit.WriteJSON(w, http.StatusOK, newSessionJSON(in), "")
}

// StopSession serves POST /api/v1/sessions/{session}/stop (admin, audited).
func (s *Server) StopSession(w http.ResponseWriter, r *http.Request) error {
	return s.setSession(w, r, httpkit.Actor(r), store.ActionStop)
}

// ResumeSession serves POST /api/v1/sessions/{session}/resume (admin, audited).
func (s *Server) ResumeSession(w http.ResponseWriter, r *http.Request) error {
	return s.setSession(w, r, httpkit.Actor(r), store.ActionResume)
}

// setSession stops or resumes a session, audits it as who, and answers
// the session as it is now.
func (s *Server) setSession(w http.ResponseWriter, r *http.Request, who, action string) error {
	in, err := s.ApplySession(r.Context(), r.PathValue("session"), who, action)
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, newSessionJSON(in), "")
}
