package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// Rate limits per connection (docs/ARCHITECTURE.md, "Rate limits"):
//
//   - rpm and minTime are one dispatch spacing, the stricter of the two: a
//     rate.Limiter with burst 1. A request takes its concurrency permit, then
//     reserves its turn; when the turn would come after the request's
//     maxWait deadline (shared with the permit wait) the reservation is
//     cancelled and the client gets 429 RATE_LIMIT_RPM. The spacing runs on
//     the real clock, since it is waited on with timers.
//   - rpd and tpd count per UTC day. A UsageCounter (Postgres) is the source
//     of truth: one conditional upsert per dispatched request when rpd is
//     set, tokens added after the response when tpd is set. Memory holds a
//     cache of the day's counts, used to skip exhausted connections.
//   - tpm is a per-minute window in memory. A dispatch reserves the
//     connection's running estimate of tokens per request; the usage the
//     upstream reports replaces the estimate. The window may go into debt,
//     which carries over to the next minutes.
//
// Days and minute windows follow Options.Now.

// Error codes of the rate limits.
const (
	CodeRateLimitRPM = "RATE_LIMIT_RPM"
	CodeRateLimitRPD = "RATE_LIMIT_RPD"
	CodeRateLimitTPM = "RATE_LIMIT_TPM"
	CodeRateLimitTPD = "RATE_LIMIT_TPD"
)

// Budget names, as Snapshot, /api/v1/gates and the metrics use them.
const (
	BudgetRPM = "rpm"
	BudgetRPD = "rpd"
	BudgetTPM = "tpm"
	BudgetTPD = "tpd"
)

// usageTimeout bounds one call to the usage store.
const usageTimeout = 2 * time.Second

// usageRetry is how long the gateway counts in memory only after the usage
// store failed, before it tries the store again.
const usageRetry = 5 * time.Second

// usageLogEvery rate-limits the log line about an unavailable usage store.
const usageLogEvery = time.Minute

// DayUsage is one connection's count for one UTC day.
type DayUsage struct {
	Requests int64
	Tokens   int64
}

// UsageCounter keeps the per-connection daily counts behind rpd and tpd,
// shared by every gateway replica (cmd adapts the store's usage_daily table).
// Every method must be safe for concurrent use; day is any instant of the
// UTC day meant.
type UsageCounter interface {
	// CountRequest counts one request for connID unless limit requests
	// were counted that day already, in one atomic step. It returns the
	// day's count after the call and whether this request was counted.
	CountRequest(ctx context.Context, connID string, day time.Time, limit int64) (count int64, ok bool, err error)
	// AddUsage adds requests and tokens to connID's day and returns the
	// day's totals after the addition.
	AddUsage(ctx context.Context, connID string, day time.Time, requests, tokens int64) (DayUsage, error)
	// DayUsage returns every connection's counts for the day, by
	// connection id; connections without usage may be absent.
	DayUsage(ctx context.Context, day time.Time) (map[string]DayUsage, error)
}

// Budget is one rate-limit window of a connection: its limit, what is left
// and when the window resets. Remaining is negative when a tpm window is in
// debt (the upstream reported more tokens than were left).
type Budget struct {
	Limit     int64
	Remaining int64
	ResetAt   time.Time
}

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
	limiter atomic.Pointer[rate.Limiter] // nil when there is no spacing
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

// setSpacing installs the dispatch spacing d, keeping the limiter's state
// when there already is one, so a changed rpm takes effect at once without
// granting a free burst.
func (r *connRate) setSpacing(d time.Duration, now time.Time) {
	if d == r.spacing && (d == 0) == (r.limiter.Load() == nil) {
		return
	}
	r.spacing = d
	lim := r.limiter.Load()
	switch {
	case d <= 0:
		r.limiter.Store(nil)
	case lim == nil:
		r.limiter.Store(rate.NewLimiter(rate.Every(d), 1))
	default:
		lim.SetLimitAt(now, rate.Every(d))
	}
}

// turnDelay is how long a dispatch reserved now would wait for its turn.
func (r *connRate) turnDelay(now time.Time) time.Duration {
	lim := r.limiter.Load()
	if lim == nil {
		return 0
	}
	tokens := lim.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / float64(lim.Limit()) * float64(time.Second))
}

func utcDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// rolloverLocked starts a new day or minute window when now has reached
// it. Debt in the tpm window is paid off at tpm tokens per minute.
func (r *connRate) rolloverLocked(l *connLimits, now time.Time) {
	if day := utcDay(now); day.After(r.day) {
		r.day = day
		r.requests, r.tokens, r.pendReq, r.pendTok = 0, 0, 0, 0
	}
	m := now.UTC().Truncate(time.Minute)
	if !m.After(r.minute) {
		return
	}
	if !r.minute.IsZero() && l.tpm > 0 {
		k := int64(m.Sub(r.minute) / time.Minute)
		if r.used -= min(k, 1<<20) * l.tpm; r.used < 0 {
			r.used = 0
		}
	} else {
		r.used = 0
	}
	r.minute, r.minuteReqs = m, 0
}

// tpmRoom reports whether a window with used tokens has room for a request
// estimated at est: anything under the limit when nothing is known yet, and
// always one request in an empty window, whatever its estimate.
func tpmRoom(used, est, tpm int64) bool {
	return used <= 0 || (used < tpm && used+est <= tpm)
}

// rateBlock is why a connection's budgets keep it out, and until when.
type rateBlock struct {
	code, gate string
	until      time.Time
}

// blocked reports whether an exhausted budget keeps the connection out at now.
func (r *connRate) blocked(l *connLimits, now time.Time) (rateBlock, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	midnight := r.day.AddDate(0, 0, 1)
	switch {
	case l.rpd > 0 && r.requests >= l.rpd:
		return rateBlock{CodeRateLimitRPD, l.gateRPD, midnight}, true
	case l.tpd > 0 && r.tokens >= l.tpd:
		return rateBlock{CodeRateLimitTPD, l.gateTPD, midnight}, true
	case l.tpm > 0 && !tpmRoom(r.used, r.est, l.tpm):
		k := int64(1)
		for ; k < 24*60; k++ {
			if tpmRoom(max(r.used-k*l.tpm, 0), r.est, l.tpm) {
				break
			}
		}
		return rateBlock{CodeRateLimitTPM, l.gateTPM, r.minute.Add(time.Duration(k) * time.Minute)}, true
	}
	return rateBlock{}, false
}

// budgets reports the connection's windows for Snapshot; nil without any.
func (r *connRate) budgets(l *connLimits, now time.Time) map[string]Budget {
	if l.rpm == 0 && !l.budgeted() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	midnight := r.day.AddDate(0, 0, 1)
	next := r.minute.Add(time.Minute)
	m := make(map[string]Budget, 4)
	if l.rpm > 0 {
		m[BudgetRPM] = Budget{Limit: l.rpm, Remaining: max(l.rpm-r.minuteReqs, 0), ResetAt: next}
	}
	if l.rpd > 0 {
		m[BudgetRPD] = Budget{Limit: l.rpd, Remaining: max(l.rpd-r.requests, 0), ResetAt: midnight}
	}
	if l.tpm > 0 {
		m[BudgetTPM] = Budget{Limit: l.tpm, Remaining: l.tpm - r.used, ResetAt: next}
	}
	if l.tpd > 0 {
		m[BudgetTPD] = Budget{Limit: l.tpd, Remaining: max(l.tpd-r.tokens, 0), ResetAt: midnight}
	}
	return m
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

// LoadUsage reads the current UTC day's counts from the usage store into the
// in-memory budgets, so that remaining budgets are right after a restart and
// follow other replicas' traffic. It never lowers a count. cmd calls it after
// every config load. Without a usage store it does nothing.
func (g *Gateway) LoadUsage(ctx context.Context) error {
	s := g.state.Load()
	if g.usage == nil || s == nil {
		return nil
	}
	now := g.now()
	m, err := g.usage.DayUsage(ctx, now)
	if err != nil {
		return fmt.Errorf("gateway: load usage: %w", err)
	}
	for _, c := range s.conns {
		u, ok := m[c.id]
		if !ok {
			continue
		}
		r := c.rate
		r.mu.Lock()
		r.rolloverLocked(&c.lim, now)
		r.requests = max(r.requests, u.Requests+r.pendReq)
		r.tokens = max(r.tokens, u.Tokens+r.pendTok)
		r.mu.Unlock()
	}
	return nil
}

// usageUp reports whether the usage store should be asked: there is one,
// and it has not failed within usageRetry.
func (g *Gateway) usageUp() bool {
	return g.usage != nil && time.Now().UnixNano() >= g.usageDownUntil.Load()
}

// usageFailed switches to counting in memory for usageRetry, logging at
// most once per usageLogEvery.
func (g *Gateway) usageFailed(err error) {
	now := time.Now().UnixNano()
	g.usageDownUntil.Store(now + int64(usageRetry))
	last := g.usageLoggedAt.Load()
	if now-last >= int64(usageLogEvery) && g.usageLoggedAt.CompareAndSwap(last, now) {
		g.log.Warn("gateway: usage store unavailable; counting rpd/tpd in memory until it is back",
			slog.Any("error", err))
	}
}

// dispatchVerdict is the outcome of counting a dispatch against the budgets.
type dispatchVerdict uint8

const (
	dispatchOK      dispatchVerdict = iota
	dispatchSkipped                 // a budget is exhausted after all: try the next connection
	dispatchGone                    // the client went away
)

// countDispatch counts the request that is about to go to c upstream: rpd
// in the usage store (memory while it is away), the rpm display count, and
// the tpm estimate, which it returns so that settle can replace it.
func (x *exchange) countDispatch(c *conn) (reserved int64, v dispatchVerdict) {
	l := &c.lim
	now := x.g.now()
	if l.rpd > 0 {
		if v := x.countRequest(c, now); v != dispatchOK {
			return 0, v
		}
	}
	r := c.rate
	r.mu.Lock()
	r.rolloverLocked(l, now)
	r.minuteReqs++
	if l.tpm > 0 {
		reserved = r.est
		r.used += reserved
		r.inflight += reserved
	}
	r.mu.Unlock()
	return reserved, dispatchOK
}

// countRequest takes one request of c's rpd budget.
func (x *exchange) countRequest(c *conn, now time.Time) dispatchVerdict {
	g, r, l := x.g, c.rate, &c.lim
	if g.usageUp() {
		ctx, cancel := context.WithTimeout(x.r.Context(), usageTimeout)
		count, ok, err := g.usage.CountRequest(ctx, c.id, now, l.rpd)
		if err == nil {
			r.mu.Lock()
			r.rolloverLocked(l, now)
			r.requests = max(r.requests, count)
			pending := r.pendReq > 0 || r.pendTok > 0
			r.mu.Unlock()
			if pending {
				g.flushUsage(ctx, c, now, 0, 0)
			}
			cancel()
			if !ok {
				return dispatchSkipped
			}
			return dispatchOK
		}
		cancel()
		if x.r.Context().Err() != nil {
			return dispatchGone
		}
		g.usageFailed(err)
	}
	// No store, or it is away: count in memory (fail-open for the store,
	// still enforced against what memory knows).
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	if r.requests >= l.rpd {
		return dispatchSkipped
	}
	r.requests++
	if g.usage != nil {
		r.pendReq++
	}
	return dispatchOK
}

// settle charges the tokens an attempt on c used (actual, 0 when the
// upstream reported none) in place of the estimate reserved at dispatch.
func (x *exchange) settle(c *conn, reserved, actual int64) {
	l := &c.lim
	if !l.countsTokens() {
		return
	}
	g, r := x.g, c.rate
	now := g.now()
	r.mu.Lock()
	r.rolloverLocked(l, now)
	if l.tpm > 0 {
		r.used = max(r.used+actual-reserved, 0)
		r.inflight -= reserved
	}
	if actual > 0 {
		if r.est == 0 {
			r.est = actual
		} else {
			r.est = (3*r.est + actual + 3) / 4
		}
	}
	record := l.tpd > 0 && actual > 0
	if record {
		r.tokens += actual
	}
	r.mu.Unlock()
	if l.tpm > 0 && g.shared != nil {
		x.sharedSettle(c, actual)
	}
	if !record || g.usage == nil {
		return
	}
	// The tokens were spent even if the client has gone: write them anyway.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.r.Context()), usageTimeout)
	defer cancel()
	g.flushUsage(ctx, c, now, 0, actual)
}

// flushUsage writes requests and tokens, plus whatever was counted in
// memory while the store was away, to the usage store. On failure the
// amounts stay pending for the next call.
func (g *Gateway) flushUsage(ctx context.Context, c *conn, now time.Time, requests, tokens int64) {
	r := c.rate
	r.mu.Lock()
	r.rolloverLocked(&c.lim, now)
	day := r.day
	requests += r.pendReq
	tokens += r.pendTok
	r.pendReq, r.pendTok = 0, 0
	r.mu.Unlock()
	if requests == 0 && tokens == 0 {
		return
	}
	var (
		tot DayUsage
		err error
	)
	if g.usageUp() {
		tot, err = g.usage.AddUsage(ctx, c.id, now, requests, tokens)
	} else {
		err = errUsageDown
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.day.Equal(day) {
		return // a new day began meanwhile; yesterday's leftovers are dropped
	}
	if err != nil {
		r.pendReq += requests
		r.pendTok += tokens
		if err != errUsageDown {
			g.usageFailed(err)
		}
		return
	}
	r.requests = max(r.requests, tot.Requests+r.pendReq)
	r.tokens = max(r.tokens, tot.Tokens+r.pendTok)
}

var errUsageDown = errors.New("gateway: usage store marked unavailable")

// takeTurn waits for c's dispatch turn (rpm/minTime spacing) while the
// request holds its permit. The wait shares the request's admission
// deadline: start is when the admission wait began and maxWait its bound
// (0 = none). A turn that cannot come in time is given back and answered
// with 429 RATE_LIMIT_RPM at once.
func (x *exchange) takeTurn(c *conn, start time.Time, maxWait time.Duration) *apiError {
	if x.g.sharedUp() {
		if aerr, ok := x.takeSharedTurn(c, start, maxWait); ok {
			return aerr
		}
	}
	lim := c.rate.limiter.Load()
	if lim == nil {
		return nil
	}
	now := time.Now()
	res := lim.ReserveN(now, 1)
	d := res.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	if maxWait > 0 && now.Add(d).After(start.Add(maxWait)) {
		res.CancelAt(now)
		x.g.metrics.rateRejected(BudgetRPM)
		return &apiError{status: http.StatusTooManyRequests, code: CodeRateLimitRPM,
			message: "connection " + c.label + " dispatches at most one request every " + c.lim.spacing.String() +
				" (rpm/minTime), and the next turn comes after the wait bound of " + maxWait.String(),
			retryAfter: ceilSeconds(d), gate: c.lim.spacingGate}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		x.waited += time.Since(now)
		return nil
	case <-x.r.Context().Done():
		res.Cancel()
		return errClientGone
	}
}

// rateError is the 429 for a budget that left no candidate.
func (x *exchange) rateError(b rateBlock, retry time.Duration) *apiError {
	var what string
	switch b.code {
	case CodeRateLimitRPD:
		what = "requests per day (rpd)"
		x.g.metrics.rateRejected(BudgetRPD)
	case CodeRateLimitTPD:
		what = "tokens per day (tpd)"
		x.g.metrics.rateRejected(BudgetTPD)
	default:
		what = "tokens per minute (tpm)"
		x.g.metrics.rateRejected(BudgetTPM)
	}
	return &apiError{status: http.StatusTooManyRequests, code: b.code,
		message: "every connection serving " + x.info.model + " is out of its rate-limit budget or cooling down; " +
			"the " + what + " budget of gate " + b.gate + " resets at " + b.until.UTC().Format(time.RFC3339),
		retryAfter: ceilSeconds(retry), gate: b.gate}
}
