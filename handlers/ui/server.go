package ui

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Server serves the dashboard's pages over the shared Core.
type Server struct {
	*httpkit.Core
	store *store.Store
	log   *slog.Logger
	deps  httpkit.Deps
	now   func() time.Time
	// dash is the dashboard's state (see ui.go).
	dash *uiState
}

// New returns the dashboard's Server over core.
func New(core *httpkit.Core) *Server {
	d := core.Deps()
	s := &Server{Core: core, store: d.Store, log: d.Logger, deps: d, now: d.Now,
		dash: newUIState(d.Store, d.SecureCookies, d.Now)}
	s.dash.csrf.SetDenyHandler(http.HandlerFunc(s.uiCSRFDenied))
	return s
}

// Assets serves the embedded static files under static.Prefix.
func (s *Server) Assets() http.Handler { return s.dash.assets.Handler() }

// Throttle is the sign-in throttle (tests replace its Sleep to count delays).
func (s *Server) Throttle() *httpkit.LoginThrottle { return s.dash.throttle }
