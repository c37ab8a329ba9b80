package gateway

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/clientkey"
	"github.com/gatehouse-dev/gatehouse/gateway/gates"
	"github.com/gatehouse-dev/gatehouse/gateway/health"
	"github.com/gatehouse-dev/gatehouse/gateway/inbound"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/metrics"
	"github.com/gatehouse-dev/gatehouse/gateway/outbound"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/gateway/tracing"
)

// The upstream clients Options.Outbound names (package outbound).
const (
	OutboundNetHTTP  = outbound.NetHTTP
	OutboundFastHTTP = outbound.FastHTTP
)

// ValidOutbound reports whether name is an upstream client New knows.
func ValidOutbound(name string) bool { return outbound.Valid(name) }

// DefaultMaxBodyBytes bounds a client request body when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 32 << 20

// DefaultMaxBodyBytesInFlight bounds the request-body bytes held at once
// when Options.MaxBodyBytesInFlight is 0 (GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT).
const DefaultMaxBodyBytesInFlight = 256 << 20

// Options configures a Gateway. Only Authenticate is required in practice:
// without it every request is refused.
type Options struct {
	// Logger receives configuration warnings and rare errors; the gateway
	// never logs per request. Default: slog.Default().
	Logger *slog.Logger
	// Registerer receives the gateway's metrics; nil registers nothing.
	// Registering twice on one registry panics, as prometheus.MustRegister does.
	Registerer prometheus.Registerer
	// Authenticate returns the client key whose secret this is, and false
	// for an unknown secret; a disabled key is returned too (the gateway
	// answers it 403 KEY_DISABLED). ctx is the request's. It is called once
	// per request and must be fast and safe for concurrent use. nil refuses
	// every key.
	Authenticate func(ctx context.Context, secret string) (ClientKey, bool)
	// AuthThrottle bounds failed client-key authentication per client
	// address (DESIGN.md, "Gateway rules that hold under attack"); nil
	// throttles nothing.
	AuthThrottle AuthThrottle
	// Now is the clock for cooldowns, suspensions, admission bookkeeping,
	// the UTC day of rpd/tpd and the tpm minute windows (default
	// time.Now). Circuit breakers and the rpm/minTime spacing use the real
	// clock.
	Now func() time.Time
	// Transport sends upstream requests. Default: the client Outbound
	// names, made for this gateway and closed with it.
	Transport http.RoundTripper
	// Outbound picks the upstream client when Transport is nil:
	// OutboundFastHTTP ("" too: fasthttp's HostClient, see
	// outbound.NewFastTransport) or OutboundNetHTTP (net/http's Transport,
	// see outbound.NewTransport).
	Outbound string
	// MaxBodyBytes bounds client request bodies (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxBodyBytesInFlight bounds the request-body bytes held in memory at
	// once, every request together (default DefaultMaxBodyBytesInFlight):
	// beyond it 503 OVERLOADED.
	MaxBodyBytesInFlight int64
	// UpstreamDeny lists the addresses the outbound clients refuse to dial
	// (GATEHOUSE_UPSTREAM_DENY; the zero value denies nothing): a request
	// to a connection whose host resolves there gets 502.
	UpstreamDeny outbound.Deny
	// lookup resolves upstream host names instead of the system resolver
	// (tests).
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Usage keeps the daily counts behind rpd and tpd (Postgres in
	// production, shared by every replica). nil counts in memory only, so
	// a restart forgets the day's counts. When it fails, the gateway counts
	// in memory until it answers again (fail-open) and logs that once a minute.
	Usage UsageCounter
	// KeyUsage keeps the daily token counts behind a client key's tpd
	// (Postgres in production: usage_daily_keys), keyed by client key id,
	// with Usage's fail-open rule. nil counts in memory only. When it is a
	// ratelimit.SpendCounter too it keeps the keys' money budgets
	// (budgetUsdDaily, budgetUsdMonthly); otherwise they count in memory.
	KeyUsage UsageCounter
	// BudgetFailClosed makes the day and money budgets (rpd, tpd,
	// budgetUsdDaily, budgetUsdMonthly) of a connection or key with a
	// usage store refuse requests with 503 USAGE_STORE_UNAVAILABLE while
	// that store is unreachable, instead of counting in memory: cluster
	// mode, where replicas cannot see each other's memory (unless
	// GATEHOUSE_BUDGET_FAIL=open).
	BudgetFailClosed bool
	// Admission admits requests through the gates. nil: an in-process
	// *admission.Controller on the Now clock, private to this gateway. Cluster
	// mode passes gateway/cluster's *Controller here, so that caps hold
	// across replicas; its errors matching admission.ErrUnavailable become
	// 503 CLUSTER_UNAVAILABLE with Retry-After 1. The caller owns a
	// controller it passes and closes it after the gateway has drained.
	Admission admission.Admitter
	// SharedLimits, when set (cluster mode: gateway/cluster's *Limits),
	// shares the rpm/minTime spacing, the tpm window, upstream cooldowns and
	// suspensions with the other replicas. nil keeps them in this process.
	// When it fails the gateway uses its in-process state (fail-open) and
	// logs that once a minute.
	SharedLimits ratelimit.Store
	// SharedSessions, when set (cluster mode: gateway/cluster's *Limits),
	// keeps the sessions' spend against sessionBudgetUsd across replicas.
	SharedSessions session.Shared
	// TracerProvider, when set, traces every proxied request (see
	// package tracing): a server span, its admission spans and
	// a client span per upstream attempt, whose context goes upstream in
	// traceparent. nil or a no-op provider traces nothing and costs nothing.
	TracerProvider trace.TracerProvider
	// RequestLog receives a record of every /v1 request at its end (see
	// RequestRecord); nil logs nothing.
	RequestLog RequestLog
	// Replica names this process in the request log (cluster mode: the
	// replica id).
	Replica string
	// SharedAffinity, when set (cluster mode: gateway/cluster's *Affinity),
	// shares the affinity bindings with the other replicas; this process
	// keeps its own as a cache in front of it. nil keeps them here.
	SharedAffinity AffinityStore
	// Alerts receives the alert events (alerts.go); nil sends none.
	Alerts Alerter
}

// Gateway is the /v1 proxy. Create it with New, give it a Config with
// Apply, serve it as an http.Handler, and Close it when done.
type Gateway struct {
	log  *slog.Logger
	auth func(context.Context, string) (ClientKey, bool)
	// throttle is Options.AuthThrottle, or one that never throttles.
	throttle AuthThrottle
	now      func() time.Time
	// transport is the outbound leg, chosen once in New (net/http or
	// fasthttp, both behind http.RoundTripper).
	transport http.RoundTripper
	// ownTransport is the transport New made, whose idle connections Close closes.
	ownTransport interface{ CloseIdleConnections() }
	maxBody      int64
	bodyBytes    *inbound.BodyBytes
	ctrl         admission.Admitter
	// local is ctrl's controller when ctrl is exactly an admission.Local
	// (not a wrapper around one, whose own Acquire must be called): the
	// exchange admits into its own permit through it (admit.go).
	local   *admission.Controller
	metrics *metrics.Set

	applyMu sync.Mutex // serialises Apply
	state   atomic.Pointer[state]
	closed  atomic.Bool
	// draining is set by Drain: requests get 503 SHUTTING_DOWN.
	draining atomic.Bool
	rotate   atomic.Uint64 // spreads ties among equal priorities

	healthMu sync.Mutex
	health   map[string]*health.Conn // by connection id

	usage    UsageCounter
	keyUsage UsageCounter
	// keyCarries is each client key's state that outlives a config, by key
	// id; guarded by applyMu.
	keyCarries map[string]*clientkey.Carry
	// days counts the daily budgets in usage and keyUsage.
	days  *ratelimit.Days
	rates map[string]*ratelimit.State // by connection id; guarded by applyMu
	// admitErrAt is when an admission error that was neither typed nor the
	// client leaving was last logged (unix nanos; logAdmitErr).
	admitErrAt atomic.Int64
	// limiter keeps spacing, tpm window, cooldowns and suspensions: in this
	// process, or shared in cluster mode (chosen once, in New).
	limiter limiter

	copyBuf sync.Pool // *[]byte, copyBufSize
	// tracer makes the request spans; nil when tracing is off (trace.go).
	tracer trace.Tracer

	// learn keeps the adaptive gates' effective caps (package health); caps
	// keeps the caps of the config in force and pushes them to admission with
	// the learned ones in place.
	learn *health.Learner
	caps  health.Caps
	// shadows keeps the shadow gates.
	shadows *health.Shadows

	// bindings keeps the affinity bindings (package session); sharedAff
	// shares them with other replicas (localAffinity when alone).
	bindings  *session.Bindings
	sharedAff AffinityStore
	// windowsSeen is set once any upstream answer has reported a usage
	// window: from then on, requests that follow no binding are placed by
	// headroom (placeNew).
	windowsSeen atomic.Bool

	// reqlog receives every request's record; replica names this process in it.
	reqlog  RequestLog
	replica string

	// sessions is the runaway guards' state (sessionguard.go).
	sessions *sessionGuards
	// alerts is Options.Alerts, or one that sends nothing.
	alerts Alerter

	// zeroMs is X-Gatehouse-Queue-Ms for a request that did not wait,
	// shared by every response (len == cap: never appended to in place).
	zeroMs []string
}

// New returns a Gateway with no configuration: until the first Apply every
// proxied request gets 503 GATEWAY_NOT_READY.
func New(opts Options) *Gateway {
	g := &Gateway{
		log:        cmp.Or(opts.Logger, slog.Default()),
		auth:       opts.Authenticate,
		throttle:   cmp.Or[AuthThrottle](opts.AuthThrottle, clientkey.NoThrottle{}),
		now:        opts.Now,
		maxBody:    opts.MaxBodyBytes,
		metrics:    metrics.New(),
		health:     make(map[string]*health.Conn),
		usage:      opts.Usage,
		keyUsage:   opts.KeyUsage,
		keyCarries: make(map[string]*clientkey.Carry),
		rates:      make(map[string]*ratelimit.State),
		limiter:    ratelimit.Local{},
		zeroMs:     []string{"0"},
		reqlog:     opts.RequestLog,
		replica:    opts.Replica,
		bindings:   session.NewBindings(limits.DefaultAffinityTTLMs*time.Millisecond, limits.DefaultMaxAffinityBindings),
		sharedAff:  cmp.Or[AffinityStore](opts.SharedAffinity, localAffinity{}),
		alerts:     cmp.Or[Alerter](opts.Alerts, noAlerts{}),
	}
	if g.reqlog == nil {
		g.reqlog = noRequestLog{}
	}
	g.tracer = tracing.New(opts.TracerProvider)
	g.days = ratelimit.NewDays(g.log)
	if opts.BudgetFailClosed {
		g.days.FailClosed()
	}
	if g.now == nil {
		g.now = time.Now
	}
	g.sessions = newSessionGuards(g.now)
	g.sessions.shared = opts.SharedSessions
	g.sessions.stops, _ = opts.SharedSessions.(session.SharedStops)
	g.learn = health.NewLearner(g.now, g.log)
	g.learn.Changed = g.caps.Repush
	g.shadows = health.NewShadows()
	if g.maxBody <= 0 {
		g.maxBody = DefaultMaxBodyBytes
	}
	g.bodyBytes = inbound.NewBodyBytes(cmp.Or(max(opts.MaxBodyBytesInFlight, 0), DefaultMaxBodyBytesInFlight))
	if g.transport = opts.Transport; g.transport == nil {
		t := outbound.New(opts.Outbound, &outbound.Dialer{Deny: opts.UpstreamDeny, Lookup: opts.lookup})
		g.transport, g.ownTransport = t, t
	}
	if opts.SharedLimits != nil {
		sl := ratelimit.NewShared(opts.SharedLimits, g.now, g.log, g.learn.AdoptShared)
		g.limiter, g.learn.Shared = sl, sl
	}
	g.ctrl = opts.Admission
	if g.ctrl == nil {
		// opts.Now, not g.now: nil lets the controller read the monotonic
		// clock alone where it can (half the cost of time.Now).
		g.ctrl = admission.Local{C: admission.New(admission.Options{Now: opts.Now})}
	}
	g.caps.Learn, g.caps.Push = g.learn, g.ctrl.SetCaps
	if l, ok := g.ctrl.(admission.Local); ok {
		g.local = l.C
	}
	if opts.Registerer != nil {
		g.metrics.Register(opts.Registerer, metrics.NewGates(g.Snapshot))
		opts.Registerer.MustRegister(g.sessions.total, newBudgetCollector(g))
	}
	return g
}

// Apply swaps in cfg as the new routing snapshot and pushes its caps into
// the admission gates at once: a raised cap admits waiters immediately, a
// lowered one admits nobody until in-flight drops below it, and running
// requests are never cut. Health (cooldowns, suspensions, breakers) and
// rate-limit state (spacing, daily counts, tpm window) carry over by
// connection id; changed rate limits apply from the next request on. Problems with single connections (bad base URL,
// unknown API style) are logged and those connections are not routed to.
func (g *Gateway) Apply(cfg Config) {
	g.applyMu.Lock()
	defer g.applyMu.Unlock()
	s, warnings := g.buildState(cfg, g.now())
	for _, w := range warnings {
		g.log.Warn("gateway: config", slog.String("problem", w))
	}
	bc := health.BreakerConfig{Failures: s.eff.BreakerFailures, Cooldown: s.eff.BreakerCooldown()}
	g.applyPriorityAging(s.eff.PriorityAging())
	keep := make(map[string]bool, len(s.conns))
	g.healthMu.Lock()
	for _, c := range s.conns {
		h := g.health[c.id]
		if h == nil {
			h = health.NewConn(bc)
			g.health[c.id] = h
		} else {
			h.SetBreaker(bc)
		}
		c.health = h
		keep[c.label] = true
	}
	for id := range g.health {
		if s.byID[id] == nil {
			delete(g.health, id)
		}
	}
	g.healthMu.Unlock()
	g.metrics.Forget(keep)
	g.applyRates(s)
	g.applyKeys(s, cfg.ClientKeys)
	g.bindings.Configure(s.eff.AffinityTTL(), s.eff.MaxAffinityBindings)
	g.caps.Set(s.caps)
	g.state.Store(s)
	g.alerts.Configure(s.eff.Alerts, s.eff.AlertCooldownMs)
}

// Loaded reports whether a configuration has been applied, and when the
// latest one was.
func (g *Gateway) Loaded() (ok bool, at time.Time) {
	s := g.state.Load()
	if s == nil {
		return false, time.Time{}
	}
	return true, s.loadedAt
}

// Close stops the gateway: later requests get 503, and the default
// transport's idle upstream connections are closed. Requests in flight
// finish normally (the server's Shutdown bounds them). The gateway runs no
// goroutines of its own.
func (g *Gateway) Close() {
	g.closed.Store(true)
	if g.ownTransport != nil {
		g.ownTransport.CloseIdleConnections()
	}
}

// ErrShuttingDown is the cause with which a server cancels the contexts of
// the requests still running when its shutdown bound runs out (for example
// through http.Server.BaseContext and context.WithCancelCause): a stream
// then gets an SSE error event SHUTTING_DOWN before it is cut, a request not
// answered yet gets 503 SHUTTING_DOWN.
var ErrShuttingDown = errors.New("gateway: shutting down")

// Drain begins a shutdown: every request still queued for a permit gets 503
// SHUTTING_DOWN with Retry-After 1 at once (its client may retry on another
// replica; waiting out a shutdown helps nobody), and so does every request
// after it, including a failover attempt of one in flight. Requests in
// flight run on and release their permits as usual. It drains the
// admission controller, a shared one included, and is idempotent.
func (g *Gateway) Drain() {
	g.draining.Store(true)
	g.ctrl.Drain()
}

// ResetHealth clears the cooldowns, suspension and circuit breaker of the
// connection id. It reports false if no such connection is configured.
func (g *Gateway) ResetHealth(ctx context.Context, connID string) bool {
	g.healthMu.Lock()
	h := g.health[connID]
	g.healthMu.Unlock()
	if h == nil {
		return false
	}
	h.Reset()
	g.applyMu.Lock()
	r := g.rates[connID]
	g.applyMu.Unlock()
	g.limiter.Reset(ctx, connID, r)
	return true
}

// Snapshot returns the live gates and connection health. Each gate carries
// its connection, provider and model as fields, so that no reader needs to
// parse its key.
func (g *Gateway) Snapshot() live.Snapshot {
	var out live.Snapshot
	s := g.state.Load()
	stats := g.ctrl.Stats()
	configured := g.caps.Configured()
	out.Gates = gates.Live(stats, configured, s.provider)
	if s == nil {
		return out
	}
	out.LoadedAt = s.loadedAt
	have := make(map[string]bool, len(stats))
	for _, st := range stats {
		have[st.Key] = true
	}
	for _, c := range s.conns {
		if !have[c.gateKey] {
			gs := gates.Identity(c.gateKey, live.LevelConnection, s.provider)
			gs.Cap = s.caps[c.gateKey]
			gs.EffectiveCap = gs.Cap
			out.Gates = append(out.Gates, gs)
		}
	}
	out.Gates = g.shadows.AppendGates(out.Gates, func(id string) string {
		if c := s.byID[id]; c != nil {
			return c.provider
		}
		return ""
	})
	slices.SortFunc(out.Gates, func(a, b live.Gate) int { return cmp.Compare(a.Key, b.Key) })
	byKey := make(map[string]admission.GateStats, len(s.keys))
	for _, st := range stats {
		if st.Level == live.LevelKey {
			byKey[st.Key] = st
		}
	}
	out.Clients = clientkey.Live(s.keyOrder, byKey)
	now := g.now()
	for _, c := range s.conns {
		state, until, reason := c.health.Status(now)
		out.Connections = append(out.Connections, live.Connection{
			ID: c.id, Name: c.name, Provider: c.provider, Health: state, Until: until, Reason: reason,
			Budgets: c.rate.Budgets(&c.lim, now), Windows: c.health.Windows(now),
		})
	}
	return out
}
