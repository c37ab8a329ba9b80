package gateway

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// Rate limits per connection (docs/ARCHITECTURE.md, "Rate limits"):
//
//   - rpm and minTime are one dispatch spacing, the stricter of the two: a
//     rate.Limiter with burst 1 (spacing.go). A request takes its concurrency
//     permit, then reserves its turn; when the turn would come after the
//     request's maxWait deadline (shared with the permit wait) the
//     reservation is cancelled and the client gets 429 RATE_LIMIT_RPM. The
//     spacing runs on the real clock, since it is waited on with timers.
//   - rpd and tpd count per UTC day (daycount.go). A UsageCounter (Postgres)
//     is the source of truth: one conditional upsert per dispatched request
//     when rpd is set, tokens added after the response when tpd is set.
//     Memory holds a cache of the day's counts, used to skip exhausted
//     connections.
//   - tpm is a per-minute window in memory (window.go). A dispatch reserves
//     the connection's running estimate of tokens per request; the usage the
//     upstream reports replaces the estimate. The window may go into debt,
//     which carries over to the next minutes.
//
// The spacing, the tpm window, cooldowns and suspensions are kept by the
// gateway's limiter (limiter.go): in this process, or shared with the other
// replicas in cluster mode (shared.go). Days and minute windows follow
// Options.Now.

// Error codes of the rate limits.
const (
	CodeRateLimitRPM = "RATE_LIMIT_RPM"
	CodeRateLimitRPD = "RATE_LIMIT_RPD"
	CodeRateLimitTPM = "RATE_LIMIT_TPM"
	CodeRateLimitTPD = "RATE_LIMIT_TPD"
)

// connLimits are a connection's rate limits as one config snapshot sets them.
type connLimits struct {
	spacing            time.Duration // 0 = none
	spacingGate        string        // rpm:<id> or minTime:<id>, whichever sets the spacing
	rpm, rpd, tpm, tpd int64
	gateRPD, gateTPM   string
	gateTPD            string
}

func newConnLimits(id string, o limits.Overrides) connLimits {
	deref := func(p *int) int {
		if p == nil || *p < 0 {
			return 0
		}
		return *p
	}
	deref64 := func(p *int64) int64 {
		if p == nil || *p < 0 {
			return 0
		}
		return *p
	}
	e := limits.Effective{RPM: deref(o.RPM), MinTimeMs: deref(o.MinTimeMs)}
	l := connLimits{
		spacing: e.DispatchSpacing(),
		rpm:     int64(e.RPM),
		rpd:     int64(deref(o.RPD)),
		tpm:     deref64(o.TPM),
		tpd:     deref64(o.TPD),
		gateRPD: "rpd:" + id,
		gateTPM: "tpm:" + id,
		gateTPD: "tpd:" + id,
	}
	l.spacingGate = "minTime:" + id
	if e.RPM > 0 && time.Minute/time.Duration(e.RPM) >= time.Duration(e.MinTimeMs)*time.Millisecond {
		l.spacingGate = "rpm:" + id
	}
	return l
}

// any reports whether any rate limit is set.
func (l *connLimits) any() bool {
	return l.spacing > 0 || l.rpm > 0 || l.rpd > 0 || l.tpm > 0 || l.tpd > 0
}

// budgeted reports whether a budget can make the connection unavailable.
func (l *connLimits) budgeted() bool { return l.rpd > 0 || l.tpm > 0 || l.tpd > 0 }

// countsTokens reports whether upstream usage must be read.
func (l *connLimits) countsTokens() bool { return l.tpm > 0 || l.tpd > 0 }

// connRate is a connection's rate-limit state. Like connHealth it outlives
// config snapshots: Apply carries it over by connection id.
type connRate struct {
	spacer  atomic.Pointer[rate.Limiter] // nil when there is no spacing
	spacing time.Duration                // guarded by Gateway.applyMu

	mu       sync.Mutex
	day      time.Time // UTC midnight the daily counts are for
	requests int64     // dispatched that day (store's count, or memory's)
	tokens   int64     // tokens that day
	// pendReq and pendTok were counted in memory while the usage store was
	// away; they are written with the next successful store call.
	pendReq, pendTok int64
	minute           time.Time // start of the current minute window
	used             int64     // tpm: tokens charged in the window, estimates of requests in flight included
	est              int64     // running estimate of tokens per request, 0 = none yet
	minuteReqs       int64     // dispatches in the window, for the rpm budget
	inflight         int64     // tpm estimates reserved by requests in flight on this replica

	shared sharedConn // cluster mode: the cached shared state (shared.go)
}

// applyRates gives every connection of s its rate state, carried over by
// id, with the new spacing in force. g.applyMu must be held.
func (g *Gateway) applyRates(s *state) {
	now := time.Now()
	seen := make(map[string]bool, len(s.conns))
	for _, c := range s.conns {
		r := g.rates[c.id]
		if r == nil {
			r = &connRate{}
			g.rates[c.id] = r
		}
		r.setSpacing(c.lim.spacing, now)
		c.rate = r
		seen[c.id] = true
	}
	for id := range g.rates {
		if !seen[id] {
			delete(g.rates, id)
		}
	}
}

// rateBlock is why a connection's budgets keep it out, and until when.
type rateBlock struct {
	code, gate string
	until      time.Time
}

// rateError is the 429 for a budget that left no candidate.
func (x *exchange) rateError(b rateBlock, retry time.Duration) *apiError {
	var what string
	switch b.code {
	case CodeRateLimitRPD:
		what = "requests per day (rpd)"
		x.g.metrics.rateRejected(live.BudgetRPD)
	case CodeRateLimitTPD:
		what = "tokens per day (tpd)"
		x.g.metrics.rateRejected(live.BudgetTPD)
	default:
		what = "tokens per minute (tpm)"
		x.g.metrics.rateRejected(live.BudgetTPM)
	}
	return &apiError{status: http.StatusTooManyRequests, code: b.code,
		message: "every connection serving " + x.info.Model + " is out of its rate-limit budget or cooling down; " +
			"the " + what + " budget of gate " + b.gate + " resets at " + b.until.UTC().Format(time.RFC3339),
		retryAfter: ceilSeconds(retry), gate: b.gate}
}

// errTurnTooLate is the 429 RATE_LIMIT_RPM for a dispatch turn on c that
// comes d from now, after the request's wait bound maxWait; where says
// whose spacing it is ("" or " across all replicas").
func (x *exchange) errTurnTooLate(c *conn, d, maxWait time.Duration, where string) *apiError {
	x.g.metrics.rateRejected(live.BudgetRPM)
	return &apiError{status: http.StatusTooManyRequests, code: CodeRateLimitRPM,
		message: "connection " + c.label + " dispatches at most one request every " + c.lim.spacing.String() +
			" (rpm/minTime)" + where + ", and the next turn comes after the wait bound of " + maxWait.String(),
		retryAfter: ceilSeconds(d), gate: c.lim.spacingGate}
}
