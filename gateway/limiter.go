package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/health"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/route"
)

// limiter keeps the rate limits that cluster mode shares between replicas
// (the rpm/minTime dispatch spacing, the tpm window) and the shared side of
// upstream health (cooldowns after a 429 or the rate-limit headers,
// suspensions after a 401/403). New chooses one for the gateway's life:
// ratelimit.Local (this process), or with Options.SharedLimits a
// *ratelimit.Shared, which keeps the in-process state alongside and falls
// back to it while the store fails. The daily budgets (rpd, tpd) are not
// here: the UsageCounter makes them exact in either mode. A connection's
// in-process state (ratelimit.State, health.Conn) stays in the connection,
// a client key's in its keyCarry; ids are connection ids or a key's store id.
type limiter interface {
	// TakeTPM and GiveTPM reserve and settle tokens of a tpm window
	// (reservations, reserve.go).
	ratelimit.Windows
	// Unavailable reports until when model on connection id is suspended
	// (suspended) or cooling according to the other replicas; zero: it is not.
	Unavailable(ctx context.Context, id string, r *ratelimit.State, tpm int64, model string, now time.Time) (until time.Time, suspended bool)
	// Blocked reports whether an exhausted budget of l keeps id out at now.
	Blocked(ctx context.Context, id string, l *ratelimit.Limits, r *ratelimit.State, now time.Time) (ratelimit.Block, bool)
	// TurnDelay is how long a dispatch turn reserved at now (real clock)
	// would wait, as far as this replica knows.
	TurnDelay(r *ratelimit.State, now time.Time) time.Duration
	// Turn waits for id's dispatch turn (spacing apart) while the request
	// holds its permit, within the deadline its admission wait started at
	// start (maxWait its bound, 0 = none).
	Turn(ctx context.Context, id string, r *ratelimit.State, spacing time.Duration, start time.Time, maxWait time.Duration) ratelimit.Turn
	// CoolDown, CoolConnection and Suspend tell the other replicas of a
	// cooldown of model (after a 429), of every model (after the rate-limit
	// headers) or a suspension (after a 401/403) of connection id for d.
	CoolDown(ctx context.Context, id, model string, d time.Duration)
	CoolConnection(ctx context.Context, id string, d time.Duration)
	Suspend(ctx context.Context, id string, d time.Duration)
	// Reset clears what other replicas see of id's cooldowns and
	// suspension; r is its rate state, nil when unknown.
	Reset(ctx context.Context, id string, r *ratelimit.State)
}

// check reports whether model on c may be tried at now: its own health,
// then what the other replicas say of it.
func (x *exchange) check(c *conn, model string, now time.Time) (health.Verdict, time.Time) {
	if x.probe {
		// A connection test reaches the upstream whatever the health state.
		return health.Available, time.Time{}
	}
	if why, until := c.health.Check(route.Suffix[x.rt], model, now); why != health.Available {
		return why, until
	}
	until, suspended := x.g.limiter.Unavailable(x.r.Context(), c.id, c.rate, c.lim.TPM, model, now)
	switch {
	case until.IsZero():
		return health.Available, time.Time{}
	case suspended:
		return health.Suspended, until
	}
	return health.Cooling, until
}

// coolDown puts model on c in cooldown after an upstream 429, here and for
// the other replicas.
func (x *exchange) coolDown(c *conn, model string, now time.Time, retryAfter time.Duration, reason string) {
	if x.probe {
		return
	}
	until := c.health.CoolDown(model, now, retryAfter, reason)
	x.g.limiter.CoolDown(x.r.Context(), c.id, model, until.Sub(now))
	x.g.alertCooling(c, now, until, reason)
}

// coolConnection puts every model on c in cooldown for d after the
// upstream's rate-limit headers said the account is spent.
func (x *exchange) coolConnection(c *conn, now time.Time, d time.Duration, reason string) {
	c.health.CoolConnection(now, d, reason)
	x.g.limiter.CoolConnection(x.r.Context(), c.id, d)
	x.g.alertCooling(c, now, now.Add(d), reason)
}

// forbidden handles an upstream 403 for model on x's route of c: only that
// route and model cool, for breakerCooldownMs; a second 403 on another
// route or model within suspendMs suspends c (DESIGN.md, "Upstream 403
// scoping"). The route's cooldown is this replica's; the suspension is
// shared.
func (x *exchange) forbidden(c *conn, model string, now time.Time) {
	if x.probe {
		return
	}
	eff := &x.s.eff
	if c.health.Forbidden(route.Suffix[x.rt], model, now, eff.BreakerCooldown(), eff.SuspendDuration()) {
		x.suspend(c, now, eff.SuspendDuration(), "upstream 403 on two models or routes")
	}
}

// suspend takes c out of rotation for d after an upstream 401, or 403s on
// two routes or models.
func (x *exchange) suspend(c *conn, now time.Time, d time.Duration, reason string) {
	if x.probe {
		return
	}
	c.health.Suspend(now, d, reason)
	x.g.limiter.Suspend(x.r.Context(), c.id, d)
	if d > 0 {
		x.g.alertConnection(c, "suspended", reason, now.Add(d))
	}
}

// takeTurn waits for c's dispatch turn while x holds its permit; a turn
// that cannot come in time is answered with 429 RATE_LIMIT_RPM at once, a
// client that leaves gets errClientGone.
func (x *exchange) takeTurn(c *conn, start time.Time, maxWait time.Duration) *apiError {
	t := x.g.limiter.Turn(x.r.Context(), c.id, c.rate, c.lim.Spacing, start, maxWait)
	switch t.Verdict {
	case ratelimit.TurnTooLate:
		return x.errTurnTooLate(c, t.Wait, maxWait, acrossReplicas(t))
	case ratelimit.TurnGone:
		return errClientGone
	}
	x.waited += t.Waited
	return nil
}

// acrossReplicas says whose spacing a turn was, for the rejection.
func acrossReplicas(t ratelimit.Turn) string {
	if t.Shared {
		return " across all replicas"
	}
	return ""
}

// noteRateLimitHeaders cools c (every model) until the earliest reset of
// the exhausted dimensions h reports, if any (package health reads them).
// count_tokens answers are left out: Anthropic limits token counting
// separately from messages, so its headers say nothing about the account's
// inference budget (and the route counts toward no rpm/rpd either).
func (x *exchange) noteRateLimitHeaders(c *conn, h http.Header) {
	if x.probe {
		return
	}
	x.noteWindows(c, h)
	if x.rt.Free() || !health.RateLimitExhausted(h) {
		return
	}
	now := x.g.now()
	if d := health.RateLimitCooldown(h, now); d > 0 {
		x.coolConnection(c, now, d, health.ReasonRateLimitHeaders)
	}
}
