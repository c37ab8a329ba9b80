package httpkit

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/go-playground/validator/v10"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
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

// Core is what the API and the dashboard share: the wired dependencies, the one
// validator, the bearer-token throttle, and the operations both surfaces call.
type Core struct {
	store *store.Store
	log   *slog.Logger
	deps  Deps
	now   func() time.Time
	// validate is the handlers' one shared validator (see validate.go).
	validate *validator.Validate
	// authThrottle counts failed bearer authentication (auththrottle.go).
	authThrottle *AuthThrottle
}

// NewCore returns the Core for d.
func NewCore(d Deps) *Core {
	now := d.Now
	if now == nil {
		now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Core{
		store:    d.Store,
		log:      d.Logger,
		deps:     d,
		now:      now,
		validate: NewValidator(),
	}
	s.authThrottle = d.AuthThrottle
	if s.authThrottle == nil {
		s.authThrottle = NewAuthThrottle(d.TrustedProxies, now)
	}
	return s
}

// Deps returns the dependencies the Core was built from, Now and Logger filled in.
func (s *Core) Deps() Deps {
	d := s.deps
	d.Now = s.now
	return d
}

// ClientAddr is the client address of r, for throttling, the audit log and logs.
func (s *Core) ClientAddr(r *http.Request) string { return clientAddr(r, s.deps.TrustedProxies) }

// MaxBodyBytes bounds every request body the API and dashboard read.
const MaxBodyBytes = 1 << 20

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

// AlertSource is what the handlers need of the alert notifier: the recent
// deliveries (every replica's) and a test alert to one webhook.
type AlertSource interface {
	RecentAlerts(ctx context.Context, limit int) ([]store.AlertDelivery, error)
	// TestAlert sends a test alert to the webhook named webhook, off the
	// request (the delivery is returned as claimed, status sending).
	TestAlert(ctx context.Context, webhook, actor string) (store.AlertDelivery, error)
	// IsNoWebhook reports whether err is TestAlert's for an unknown name.
	IsNoWebhook(err error) bool
}

// Prober is what the dashboard needs from the gateway to test a connection: one
// tiny request through the real path, bound to the connection (cmd adapts
// gateway.Gateway.Probe). Declared here, by its consumer, like GateSource.
type Prober interface {
	// Probe sends the test request for connection id and reports its answer;
	// a result with Refused set says why nothing was sent.
	Probe(ctx context.Context, id string) (web.ProbeView, error)
}

// Store, Logger, Now and Validator are the Core's parts, for the surfaces built on it.
func (s *Core) Store() *store.Store            { return s.store }
func (s *Core) Logger() *slog.Logger           { return s.log }
func (s *Core) Now() time.Time                 { return s.now() }
func (s *Core) Validator() *validator.Validate { return s.validate }
