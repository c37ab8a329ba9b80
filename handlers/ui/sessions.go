package ui

import (
	"net/http"
	"net/url"
	"slices"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/a-h/templ"

	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// errUISessionUnknown answers a stop or resume of a session this replica
// does not know.
var errUISessionUnknown = &uiStatus{http.StatusNotFound, "error.sessionUnknown"}

// Sessions serves GET /sessions (viewer or admin): the live sessions,
// filtered by key= and state=, refreshed from /sessions/live.
func (s *Server) Sessions(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	v, err := s.sessionList(r)
	if err != nil {
		return err
	}
	keys, err := s.store.ListClientKeys(r.Context())
	if err != nil {
		return err
	}
	for _, k := range keys {
		v.Keys = append(v.Keys, web.SessionKey{ID: k.ID, Name: k.Name})
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.SessionsPage(s.uiPage(r, rq), v))
}

// SessionsLive serves GET /sessions/live: the rows of /sessions with the
// same filters, as the fragment "sessions" of the live refresh.
func (s *Server) SessionsLive(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	v, err := s.sessionList(r)
	if err != nil {
		return err
	}
	if err := s.dash.sessions.Write(r, w, rq.sess); err != nil {
		return err
	}
	f, err := s.renderFragments(r.Context(), map[string]templ.Component{"sessions": web.SessionRows(s.uiPage(r, rq), v)})
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, LiveView{Fragments: f}, "")
}

// sessionList is the sessions of the page's filters (an unknown state
// filters nothing).
func (s *Server) sessionList(r *http.Request) (web.SessionList, error) {
	q := r.URL.Query()
	v := web.SessionList{Key: q.Get("key"), State: q.Get("state"), LiveIntervalMs: liveInterval}
	if !slices.Contains(web.SessionStates, v.State) {
		v.State = ""
	}
	live := url.Values{}
	if v.Key != "" {
		live.Set("key", v.Key)
	}
	if v.State != "" {
		live.Set("state", v.State)
	}
	v.LiveURL = "/sessions/live"
	if len(live) > 0 {
		v.LiveURL += "?" + live.Encode()
	}
	if s.deps.Sessions == nil {
		return v, nil
	}
	for _, in := range httpkit.SessionFilter(s.deps.Sessions.ListSessions(), v.Key, v.State) {
		v.Rows = append(v.Rows, sessionRow(in))
	}
	return v, nil
}

func sessionRow(in session.Info) web.SessionRow {
	return web.SessionRow{Session: in.Session, KeyName: in.KeyName, Client: in.Client, Connection: in.Connection, State: in.State,
		Requests: in.Requests, InFlight: in.InFlight, Waiting: int64(in.Waiting), InputTokens: in.InputTokens,
		OutputTokens: in.OutputTokens, CachedTokens: in.CachedTokens, CostMicros: in.CostMicros, LastSeen: in.LastSeen}
}

// StopSession serves POST /sessions/{session}/stop (admin, audited).
func (s *Server) StopSession(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	return s.uiSetSession(w, r, rq, store.ActionStop, "flash.session.stopped")
}

// ResumeSession serves POST /sessions/{session}/resume (admin, audited).
func (s *Server) ResumeSession(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	return s.uiSetSession(w, r, rq, store.ActionResume, "flash.session.resumed")
}

func (s *Server) uiSetSession(w http.ResponseWriter, r *http.Request, rq *uiRequest, action, flash string) error {
	id := r.PathValue("session")
	if _, err := s.ApplySession(r.Context(), id, uiActor(rq), action); err != nil {
		if err == httpkit.ErrNoSession {
			return errUISessionUnknown
		}
		return err
	}
	back := "/sessions"
	q := url.Values{}
	for _, k := range []string{"key", "state"} {
		if v := r.URL.Query().Get(k); v != "" {
			q.Set(k, v)
		}
	}
	if len(q) > 0 {
		back += "?" + q.Encode()
	}
	return s.uiFlash(w, r, rq, web.FlashSuccess, rq.l.T(flash, id), back)
}
