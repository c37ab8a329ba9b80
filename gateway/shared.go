package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Shared limits (cluster mode; docs/ARCHITECTURE.md, "Cluster mode"): with
// Options.SharedLimits set, the rpm/minTime dispatch spacing, the tpm window,
// upstream cooldowns (429) and suspensions (401/403) are kept in a store every
// replica sees, on the store's clock. The in-process state is still kept
// alongside and takes over whenever the store fails (fail-open). Without
// SharedLimits none of this code runs.

// sharedCacheFor is how long a replica trusts its copy of a connection's
// shared state (cooldowns, suspension, tpm window) before reading it again.
const sharedCacheFor = 250 * time.Millisecond

// sharedRetry is how long the gateway keeps to its in-process limits after
// the shared store failed, before it asks the store again.
const sharedRetry = time.Second

// sharedLogEvery rate-limits the log line about an unavailable shared store.
const sharedLogEvery = time.Minute

// SharedLimits keeps rate-limit and upstream-health state that every gateway
// replica shares (cluster mode: gateway/cluster's *Limits over Redis).
// Durations are relative to the store's clock, so replicas' clocks need not
// agree. Every method must be safe for concurrent use and bound its own
// wait; an error makes the gateway fall back to its in-process state.
type SharedLimits interface {
	// ReserveTurn reserves connID's next dispatch turn, spacing after the
	// turn reserved before it, and returns how long until that turn. With
	// budget >= 0 a turn more than budget away is not reserved: ok is false
	// and wait is the time to it.
	ReserveTurn(ctx context.Context, connID string, spacing, budget time.Duration) (wait time.Duration, ok bool, err error)
	// View returns connID's shared state now; tpm is the connection's
	// tokens-per-minute limit, which pays off debt between windows.
	View(ctx context.Context, connID string, tpm int64) (SharedView, error)
	// AddTokens charges tokens to connID's tpm window.
	AddTokens(ctx context.Context, connID string, tpm, tokens int64) error
	// CoolDown marks model on connID as cooling for d (never shortening a
	// longer cooldown already there).
	CoolDown(ctx context.Context, connID, model string, d time.Duration) error
	// Suspend takes connID out of rotation for d.
	Suspend(ctx context.Context, connID string, d time.Duration) error
	// Reset clears connID's cooldowns and suspension.
	Reset(ctx context.Context, connID string) error
}

// SharedView is one connection's shared state as SharedLimits.View reads it.
type SharedView struct {
	// Suspended is how long the connection stays suspended (0: not).
	Suspended time.Duration
	// Cooling is how long each cooling model stays cooling.
	Cooling map[string]time.Duration
	// TPMUsed is the tokens charged to the current minute window, debt
	// from earlier windows included.
	TPMUsed int64
	// TPMWindowLeft is the time until the current minute window ends.
	TPMWindowLeft time.Duration
}

// sharedConn is a replica's cached copy of one connection's shared state.
// It lives in connRate, so it outlives config snapshots.
type sharedConn struct {
	fetch sync.Mutex // one reader of the store at a time per connection

	mu          sync.Mutex
	fetchedAt   time.Time // real clock; zero: nothing cached
	suspendedAt time.Time // local (Options.Now) instants the view translates to
	cooling     map[string]time.Time
	tpmUsed     int64
	windowEnd   time.Time

	// nextTurn is this replica's latest idea of when the connection's next
	// dispatch turn is free (unix nanos, real clock), to prefer free ones.
	nextTurn atomic.Int64
}

// sharedUp reports whether the shared store should be asked.
func (g *Gateway) sharedUp() bool {
	return g.shared != nil && time.Now().UnixNano() >= g.sharedDownUntil.Load()
}

// sharedFailed falls back to the in-process limits for sharedRetry, logging
// at most once per sharedLogEvery.
func (g *Gateway) sharedFailed(err error) {
	now := time.Now().UnixNano()
	g.sharedDownUntil.Store(now + int64(sharedRetry))
	last := g.sharedLoggedAt.Load()
	if now-last >= int64(sharedLogEvery) && g.sharedLoggedAt.CompareAndSwap(last, now) {
		g.log.Warn("gateway: shared rate-limit store unavailable; using this replica's own limits until it is back",
			slog.Any("error", err))
	}
}

// sharedState returns c's shared state, read from the store when the cached
// copy is older than sharedCacheFor; ok is false when there is none to go
// by (store away). The caller must not modify the result's map.
func (g *Gateway) sharedState(ctx context.Context, c *conn) (s *sharedConn, ok bool) {
	s = &c.rate.shared
	s.mu.Lock()
	fresh := !s.fetchedAt.IsZero() && time.Since(s.fetchedAt) < sharedCacheFor
	s.mu.Unlock()
	if fresh {
		return s, true
	}
	if !g.sharedUp() {
		return s, false
	}
	s.fetch.Lock()
	defer s.fetch.Unlock()
	s.mu.Lock()
	fresh = !s.fetchedAt.IsZero() && time.Since(s.fetchedAt) < sharedCacheFor
	s.mu.Unlock()
	if fresh {
		return s, true // another request read it meanwhile
	}
	v, err := g.shared.View(ctx, c.id, c.lim.tpm)
	if err != nil {
		if ctx.Err() == nil {
			g.sharedFailed(err)
		}
		return s, false
	}
	now := g.now()
	s.mu.Lock()
	s.fetchedAt = time.Now()
	s.suspendedAt = time.Time{}
	if v.Suspended > 0 {
		s.suspendedAt = now.Add(v.Suspended)
	}
	s.cooling = make(map[string]time.Time, len(v.Cooling))
	for m, d := range v.Cooling {
		s.cooling[m] = now.Add(d)
	}
	s.tpmUsed = v.TPMUsed
	s.windowEnd = now.Add(v.TPMWindowLeft)
	s.mu.Unlock()
	return s, true
}

// sharedCheck is health.check for the state other replicas share: whether
// model on c is suspended or cooling according to the store.
func (x *exchange) sharedCheck(c *conn, model string, now time.Time) (unavailable, time.Time) {
	s, ok := x.g.sharedState(x.r.Context(), c)
	if !ok {
		return availableNow, time.Time{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Before(s.suspendedAt) {
		return unavailSuspended, s.suspendedAt
	}
	if until, ok := s.cooling[model]; ok && now.Before(until) {
		return unavailCooling, until
	}
	return availableNow, time.Time{}
}

// sharedTPM returns the shared tpm window of c, with this replica's
// estimates of requests in flight added: used tokens and when the window
// ends. ok is false when the store is away.
func (x *exchange) sharedTPM(c *conn) (used int64, windowEnd time.Time, ok bool) {
	s, ok := x.g.sharedState(x.r.Context(), c)
	if !ok {
		return 0, time.Time{}, false
	}
	s.mu.Lock()
	used, windowEnd = s.tpmUsed, s.windowEnd
	s.mu.Unlock()
	c.rate.mu.Lock()
	used += c.rate.inflight
	c.rate.mu.Unlock()
	return used, windowEnd, true
}

// sharedBlocked is connRate.blocked for the tpm window when it is shared;
// the daily budgets are checked in memory as always (they are exact through
// the UsageCounter).
func (x *exchange) sharedBlocked(c *conn, now time.Time) (rateBlock, bool) {
	l := &c.lim
	r := c.rate
	r.mu.Lock()
	r.rolloverLocked(l, now)
	midnight := r.day.AddDate(0, 0, 1)
	est := r.est
	switch {
	case l.rpd > 0 && r.requests >= l.rpd:
		r.mu.Unlock()
		return rateBlock{CodeRateLimitRPD, l.gateRPD, midnight}, true
	case l.tpd > 0 && r.tokens >= l.tpd:
		r.mu.Unlock()
		return rateBlock{CodeRateLimitTPD, l.gateTPD, midnight}, true
	}
	r.mu.Unlock()
	if l.tpm == 0 {
		return rateBlock{}, false
	}
	used, end, ok := x.sharedTPM(c)
	if !ok {
		return r.blocked(l, now)
	}
	if tpmRoom(used, est, l.tpm) {
		return rateBlock{}, false
	}
	k := int64(0)
	for ; k < 24*60; k++ {
		if tpmRoom(max(used-(k+1)*l.tpm, 0), est, l.tpm) {
			break
		}
	}
	return rateBlock{CodeRateLimitTPM, l.gateTPM, end.Add(time.Duration(k) * time.Minute)}, true
}

// sharedSettle charges tokens to c's shared tpm window and to the cached
// copy, so this replica sees its own charge at once.
func (x *exchange) sharedSettle(c *conn, tokens int64) {
	g := x.g
	if tokens <= 0 || !g.sharedUp() {
		return
	}
	s := &c.rate.shared
	s.mu.Lock()
	s.tpmUsed += tokens
	s.mu.Unlock()
	// The tokens were spent even if the client has gone.
	ctx := context.WithoutCancel(x.r.Context())
	if err := g.shared.AddTokens(ctx, c.id, c.lim.tpm, tokens); err != nil {
		g.sharedFailed(err)
	}
}

// sharedCoolDown tells the other replicas that model on c cools until until.
func (x *exchange) sharedCoolDown(c *conn, model string, now, until time.Time) {
	g := x.g
	d := until.Sub(now)
	if d <= 0 || !g.sharedUp() {
		return
	}
	ctx := context.WithoutCancel(x.r.Context())
	if err := g.shared.CoolDown(ctx, c.id, model, d); err != nil {
		g.sharedFailed(err)
	}
}

// sharedSuspend tells the other replicas that c is suspended for d.
func (x *exchange) sharedSuspend(c *conn, d time.Duration) {
	g := x.g
	if d <= 0 || !g.sharedUp() {
		return
	}
	ctx := context.WithoutCancel(x.r.Context())
	if err := g.shared.Suspend(ctx, c.id, d); err != nil {
		g.sharedFailed(err)
	}
}

// sharedTurnDelay is turnDelay for a shared spacing: this replica's latest
// idea of the time to the next free turn.
func (r *connRate) sharedTurnDelay(now time.Time) time.Duration {
	return max(time.Duration(r.shared.nextTurn.Load()-now.UnixNano()), 0)
}

// takeSharedTurn is takeTurn with the spacing kept in the shared store. ok
// is false when the store failed and the in-process limiter must decide.
// A turn is not given back when the client leaves while waiting for it (the
// store cannot tell whether later turns were reserved after it).
func (x *exchange) takeSharedTurn(c *conn, start time.Time, maxWait time.Duration) (aerr *apiError, ok bool) {
	g := x.g
	budget := time.Duration(-1)
	now := time.Now()
	if maxWait > 0 {
		budget = max(start.Add(maxWait).Sub(now), 0)
	}
	d, reserved, err := g.shared.ReserveTurn(x.r.Context(), c.id, c.lim.spacing, budget)
	if err != nil {
		if x.r.Context().Err() != nil {
			return errClientGone, true
		}
		g.sharedFailed(err)
		return nil, false
	}
	if !reserved {
		c.rate.shared.nextTurn.Store(now.Add(d).UnixNano())
		g.metrics.rateRejected(BudgetRPM)
		return &apiError{status: http.StatusTooManyRequests, code: CodeRateLimitRPM,
			message: "connection " + c.label + " dispatches at most one request every " + c.lim.spacing.String() +
				" (rpm/minTime) across all replicas, and the next turn comes after the wait bound of " + maxWait.String(),
			retryAfter: ceilSeconds(d), gate: c.lim.spacingGate}, true
	}
	c.rate.shared.nextTurn.Store(now.Add(d + c.lim.spacing).UnixNano())
	if d <= 0 {
		return nil, true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		x.waited += time.Since(now)
		return nil, true
	case <-x.r.Context().Done():
		return errClientGone, true
	}
}

// resetShared clears connID's shared cooldowns and suspension and this
// replica's copy of them.
func (g *Gateway) resetShared(connID string) {
	if g.shared == nil {
		return
	}
	g.applyMu.Lock()
	r := g.rates[connID]
	g.applyMu.Unlock()
	if r != nil {
		r.shared.mu.Lock()
		r.shared.fetchedAt = time.Time{}
		r.shared.suspendedAt = time.Time{}
		r.shared.cooling = nil
		r.shared.mu.Unlock()
	}
	if err := g.shared.Reset(context.Background(), connID); err != nil {
		g.sharedFailed(err)
	}
}
