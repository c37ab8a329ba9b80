// Package handlers serves Gatehouse over HTTP: the dashboard, the REST API under
// /api/v1, health and readiness probes, and it mounts the gateway under /v1.
//
// Every route is listed in routes.go. Handlers return errors; one adapter per surface
// (problem+json for the API, an HTML page for the dashboard) maps them to a status and
// logs what the client must not see.
package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/go-playground/validator/v10"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/store"
)

// GateSource is what the handlers need from the gateway: a snapshot of its live gates and
// connection health, and a way to clear a connection's health state. It is declared
// here, by its consumer, to keep the dependency one way.
type GateSource interface {
	// Snapshot returns the live gates, every connection's health and budgets and, in
	// cluster mode, the cluster's state.
	Snapshot() live.Snapshot
	// ResetHealth clears connection id's cooldowns, suspension and breaker; it reports
	// false when the gateway does not know the connection. ctx is the request's.
	ResetHealth(ctx context.Context, id string) bool
}

// Deps are the parts a Server is wired from. Store and Logger are required.
type Deps struct {
	Store  *store.Store
	Logger *slog.Logger
	// SecretKey is the 32-byte installation secret; session keys are derived from it.
	SecretKey []byte
	// Gateway serves /v1/ (may be nil until the gateway is wired).
	Gateway http.Handler
	// Gates provides live admission stats (may be nil).
	Gates GateSource
	// Sessions provides the runaway guards' sessions (may be nil).
	Sessions SessionSource
	// Alerts provides the alert deliveries and test alerts (may be nil).
	Alerts AlertSource
	// Prober sends a connection's test request (the dashboard's "Test
	// connection"); nil answers every test with "not loaded".
	Prober Prober
	// Metrics serves /metrics (may be nil). On this handler it needs an API token of
	// any role; a scraper without one uses a listener of its own (GATEHOUSE_METRICS_ADDR).
	Metrics http.Handler
	// BodyReadTimeout bounds how long a request body may take to arrive after the
	// handler starts (GATEHOUSE_BODY_READ_TIMEOUT): past it the request gets 408 and
	// its connection is closed, on every route. 0 sets no bound.
	BodyReadTimeout time.Duration
	// Ready reports readiness for /readyz: ok and a human-readable detail.
	Ready func() (ok bool, detail string)
	// SecureCookies marks session cookies Secure (set when served behind TLS).
	SecureCookies bool
	// Now is the clock (tests inject one); nil means time.Now.
	Now func() time.Time
	// TrustedProxies are the reverse proxies (GATEHOUSE_TRUSTED_PROXIES) whose
	// X-Forwarded-For names the client; see clientAddr.
	TrustedProxies []netip.Prefix
	// AuthThrottle throttles failed API-token authentication per client address; give
	// the gateway the same one (gateway.Options.AuthThrottle) so that /v1, /api/v1
	// and /metrics count together. nil: one of its own over TrustedProxies.
	AuthThrottle *AuthThrottle
	// RequestLogOff is set when the request log is off (GATEHOUSE_REQUEST_LOG=off):
	// the overview then shows no error or volume counts rather than zeros.
	RequestLogOff bool
	// UpstreamDeny lists the addresses a connection's baseUrl may not resolve to
	// (GATEHOUSE_UPSTREAM_DENY). The zero value denies nothing; cmd parses the
	// variable, DefaultUpstreamDeny when unset.
	UpstreamDeny UpstreamDeny
}

// Server holds the wired dependencies of every handler.
type Server struct {
	store *store.Store
	log   *slog.Logger
	deps  Deps
	now   func() time.Time
	// validate is the handlers' one shared validator (see validate.go).
	validate *validator.Validate
	// dash is the dashboard's state (see ui.go).
	dash *uiState
	// authThrottle counts failed bearer authentication (auththrottle.go).
	authThrottle *AuthThrottle
}

// New returns a Server for d.
func New(d Deps) *Server {
	now := d.Now
	if now == nil {
		now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		store:    d.Store,
		log:      d.Logger,
		deps:     d,
		now:      now,
		validate: newValidator(),
		dash:     newUIState(d.Store, d.SecureCookies, now),
	}
	s.authThrottle = d.AuthThrottle
	if s.authThrottle == nil {
		s.authThrottle = NewAuthThrottle(d.TrustedProxies, now)
	}
	s.dash.csrf.SetDenyHandler(http.HandlerFunc(s.uiCSRFDenied))
	return s
}

// clientAddr is the client address of r, for throttling, the audit log and logs.
func (s *Server) clientAddr(r *http.Request) string { return clientAddr(r, s.deps.TrustedProxies) }

// maxBodyBytes bounds every request body the API and dashboard read.
const maxBodyBytes = 1 << 20
