package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
)

// Budget reservations (docs/ARCHITECTURE.md, "Budget reservations"): right
// before an attempt is dispatched, the request's estimated tokens are
// reserved against its key's tpm and tpd and its connection's, all or
// nothing (ratelimit.Reservation); the attempt's end settles them once: by
// the usage the answer reported, by nothing when the upstream answered an
// error status, or — the usage unknown (the client hung up, the stream
// broke, no usage came) — by keeping the whole reservation charged.

// holds is what an exchange holds for the attempt to come.
type holds struct {
	// resv is what the attempt in flight holds of the budgets on its path;
	// skipBlk why the latest connection skipped for its budget was, for
	// the answer when no other serves.
	resv    ratelimit.Reservation
	skipBlk ratelimit.Block
	// waitedBefore is what the request had waited when the current
	// candidate's wait began: its turns must come within maxWait less that
	// (one deadline per request).
	waitedBefore time.Duration
	// kturn is the key's dispatch turn of the attempt to come, given back
	// if no dispatch follows it.
	kturn ratelimit.Turn
}

// estimate is x's reservation: the body's length ÷ 4, rounded up, for the
// input, plus the request's output bound, or the settings'
// defaultOutputReserve when it sets none.
func (x *exchange) estimate() int64 {
	in, out := x.estimateParts()
	return in + out
}

// estimateParts is x's estimate as input and output tokens.
func (x *exchange) estimateParts() (in, out int64) {
	out = x.info.MaxOutput
	if out <= 0 {
		out = int64(x.s.eff.DefaultOutputReserve)
	}
	return (int64(len(x.body.Raw)) + 3) / 4, out
}

// reserve reserves x's estimate against the budgets of its key and of c,
// into x.resv, and reports whether the attempt goes ahead; if not, what
// the attempt ends with. A key budget it does not fit is the client's
// answer (429, no failover: the limit is the client's); a connection budget
// it does not fit skips c (x.skipBlk says why), and what the key held is
// given back with it. A client that left meanwhile ends the attempt too.
func (x *exchange) reserve(c *conn) (attemptResult, bool) {
	g, ks := x.g, x.key
	ctx := x.r.Context()
	now := g.now()
	est := x.estimate()
	if ks.Lim.CountsTokens() {
		b := ratelimit.Budget{ID: ks.StoreID, DayID: ks.ID, L: &ks.Lim, R: &ks.Carry.Rate, U: g.keyUsage}
		if blk, v := x.resv.Reserve(ctx, g.limiter, g.days, b, est, now); v != ratelimit.DispatchOK {
			x.fail(x.errKeyBudget(blk, est, now))
			return attemptAnswered, false
		}
	}
	if ks.Lim.Spends() {
		b := ratelimit.Budget{ID: ks.StoreID, DayID: ks.ID, L: &ks.Lim, R: &ks.Carry.Rate, U: g.keyUsage}
		in, out := x.estimateParts()
		cost := ratelimit.EstimateCost(x.cur.t.rate, in, out)
		if blk, v := x.resv.ReserveSpend(ctx, g.limiter, g.days, b, cost, now); v != ratelimit.DispatchOK {
			x.fail(x.errKeyBudget(blk, cost, now))
			return attemptAnswered, false
		}
	}
	if !x.reserveSession() {
		return attemptAnswered, false
	}
	if c.lim.CountsTokens() {
		b := ratelimit.Budget{ID: c.id, DayID: c.id, L: &c.lim, R: c.rate, U: g.usage}
		if blk, v := x.resv.Reserve(ctx, g.limiter, g.days, b, est, now); v != ratelimit.DispatchOK {
			x.skipBlk = blk
			return attemptSkipped, false
		}
	}
	if ctx.Err() != nil {
		return attemptAnswered, false // nothing dispatched: the holds go back
	}
	return 0, true
}

// settleReservation settles what x.resv holds with what the attempt is
// known to have cost.
func (x *exchange) settleReservation(u ratelimit.Usage) {
	x.resv.Settle(x.r.Context(), x.g.limiter, x.g.days, u, x.g.now())
	x.settleSession(u)
	x.alertBudget()
}

// errKeyBudget is the 429 RATE_LIMIT_TPM / _TPD for a key whose tpm window
// or tpd budget b is spent (est 0) or has too little left for a
// reservation of est tokens: gate key-tpm:<id> / key-tpd:<id>, Retry-After
// until the window or the UTC day ends, no failover (the limit is the
// client's).
func (x *exchange) errKeyBudget(b ratelimit.Block, est int64, now time.Time) *apiError {
	if b.Code == CodeBudgetExceeded {
		return x.errKeySpend(b, est, now)
	}
	budget, what := b.Budget()
	x.g.metrics.RateRejected(budget)
	x.key.Metrics.BudgetRejected(budget)
	msg := "client key " + strconv.Quote(x.key.Name) + " is out of its " + what + " budget (gate " + b.Gate + ")"
	if est > 0 {
		msg = "client key " + strconv.Quote(x.key.Name) + " has too little of its " + what + " budget (gate " + b.Gate +
			") left for this request's estimate of " + strconv.FormatInt(est, 10) + " tokens (input bytes ÷ 4 + the output bound)"
	}
	return &apiError{Status: http.StatusTooManyRequests, Code: b.Code,
		Message: msg + "; it resets at " + b.Until.UTC().Format(time.RFC3339), RetryAfter: ceilSeconds(b.Until.Sub(now)), Gate: b.Gate}
}

// errKeySpend is the 429 BUDGET_EXCEEDED for a key whose money budget b
// has too little left for a request estimated to cost est micro-dollars:
// gate key-budget:<id>, Retry-After until the UTC day or month ends.
func (x *exchange) errKeySpend(b ratelimit.Block, est int64, now time.Time) *apiError {
	x.g.metrics.RateRejected(b.Limit)
	x.key.Metrics.BudgetRejected(b.Limit)
	msg := "client key " + strconv.Quote(x.key.Name) + " has too little of its USD budget (gate " + b.Gate +
		") left for this request's estimated cost of $" + limits.Micros(est).String() +
		" (input bytes ÷ 4 at the input price + the output bound at the output price)"
	return &apiError{Status: http.StatusTooManyRequests, Code: b.Code,
		Message: msg + "; it resets at " + b.Until.UTC().Format(time.RFC3339), RetryAfter: ceilSeconds(b.Until.Sub(now)), Gate: b.Gate}
}

// Reserved is the tokens held by reservations not yet settled, over every
// connection and client key: 0 once every request in flight has ended (a
// reservation is released or reconciled exactly once).
func (g *Gateway) Reserved() int64 {
	g.applyMu.Lock()
	defer g.applyMu.Unlock()
	var n int64
	for _, r := range g.rates {
		n += r.Reserved()
	}
	for _, kc := range g.keyCarries {
		n += kc.Rate.Reserved()
	}
	return n
}
