package gateway

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/tracing"
	"github.com/gatehouse-dev/gatehouse/gateway/usage"
)

// Budget reservations (gateway/ratelimit's doc, "Reservations"): right
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
	// estIn and estOut are the request's estimate (estimateParts), once
	// estKnown; relayed counts the answer's bytes read from the upstream.
	estIn, estOut int64
	estKnown      bool
	relayed       int64
	// budgetErr is the store's error of a DispatchFailed rpd count.
	budgetErr error
}

// mediaPartTokens is what the estimate counts for each image or file part
// of the input.
const mediaPartTokens = 1600

// estimate is x's reservation: the body's length ÷ 4, rounded up, plus
// 1 600 tokens for each image or file part, for the input; plus the
// request's output bound (the settings' defaultOutputReserve when it sets
// none) times its n (Gemini: candidateCount), at most the settings'
// maxOutputReserve. The sum saturates: no request makes it wrap.
func (x *exchange) estimate() int64 {
	in, out := x.estimateParts()
	return ratelimit.SatAdd(in, out)
}

// estimateParts is x's estimate as input and output tokens.
func (x *exchange) estimateParts() (in, out int64) {
	if !x.estKnown {
		x.estIn, x.estOut = estimateTokens(x.body.Raw, x.info, x.s.eff.DefaultOutputReserve, x.s.eff.MaxOutputReserve)
		x.estKnown = true
	}
	return x.estIn, x.estOut
}

// estimateTokens is the estimate of a request body b scanned as info, with
// the settings' defaultOutputReserve and maxOutputReserve (estimate).
func estimateTokens(b []byte, info usage.Request, defOut, maxOut int) (in, out int64) {
	out = info.MaxOutput
	if out <= 0 {
		out = int64(defOut)
	}
	out = ratelimit.SatMul(out, max(info.Choices, 1))
	if maxOut > 0 {
		out = min(out, int64(maxOut))
	}
	in = (int64(len(b)) + 3) / 4
	if parts := usage.MediaParts(b); parts > 0 {
		in = ratelimit.SatAdd(in, ratelimit.SatMul(parts, mediaPartTokens))
	}
	return in, out
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
			x.fail(x.errReserve(blk, v, est, now, nil))
			return attemptAnswered, false
		}
	}
	if ks.Lim.Spends() {
		b := ratelimit.Budget{ID: ks.StoreID, DayID: ks.ID, L: &ks.Lim, R: &ks.Carry.Rate, U: g.keyUsage}
		in, out := x.estimateParts()
		cost := ratelimit.EstimateCost(x.cur.t.rate, in, out)
		if blk, v := x.resv.ReserveSpend(ctx, g.limiter, g.days, b, cost, now); v != ratelimit.DispatchOK {
			x.fail(x.errReserve(blk, v, cost, now, nil))
			return attemptAnswered, false
		}
	}
	if !x.reserveSession() {
		return attemptAnswered, false
	}
	if c.lim.CountsTokens() {
		b := ratelimit.Budget{ID: c.id, DayID: c.id, L: &c.lim, R: c.rate, U: g.usage, Conn: true}
		if blk, v := x.resv.Reserve(ctx, g.limiter, g.days, b, est, now); v != ratelimit.DispatchOK {
			if v != ratelimit.DispatchSkipped {
				x.fail(x.errBudgetStore(blk, v, c))
				return attemptAnswered, false
			}
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
// known to have cost; for an unknown outcome, a connection's budgets are
// charged what the upstream can have processed: the input estimate and
// the output relayed (its bytes ÷ 4, rounded up).
func (x *exchange) settleReservation(u ratelimit.Usage) {
	if !u.Known {
		in, _ := x.estimateParts()
		u.Processed = ratelimit.SatAdd(in, ratelimit.SatAdd(x.relayed, 3)/4)
	}
	x.resv.Settle(x.r.Context(), x.g.limiter, x.g.days, u, x.g.now())
	x.settleSession(u)
	x.alertBudget()
}

// errReserve is the answer to a key's reservation that did not go ahead
// (v): its budget's 429, or the store's refusal or absence.
func (x *exchange) errReserve(b ratelimit.Block, v ratelimit.Dispatch, est int64, now time.Time, c *conn) *apiError {
	if v == ratelimit.DispatchFailed || v == ratelimit.DispatchUnavailable {
		return x.errBudgetStore(b, v, c)
	}
	return x.errKeyBudget(b, est, now)
}

// errBudgetStore is the answer to a request whose budgets the usage store
// could not count: 503 USAGE_STORE_UNAVAILABLE (Retry-After 1) while it is
// unreachable and the budgets fail closed, or 500 INTERNAL when it refused
// the statement (logged with the request's identity: that request alone
// fails, the store stays in use).
func (x *exchange) errBudgetStore(b ratelimit.Block, v ratelimit.Dispatch, c *conn) *apiError {
	if v == ratelimit.DispatchUnavailable {
		return errUsageStoreUnavailable
	}
	attrs := []any{slog.String("request_id", x.requestID()), slog.Any("error", b.Err)}
	if x.key != nil {
		attrs = append(attrs, slog.String("client_key_id", x.key.ID))
	}
	if c != nil {
		attrs = append(attrs, slog.String("connection_id", c.id))
	}
	x.g.log.Error("gateway: the usage store refused a budget statement; request answered 500 "+CodeInternal, attrs...)
	return &apiError{Status: http.StatusInternalServerError, Code: CodeInternal,
		Message: "the gateway could not count this request against its budgets"}
}

// errUsageStoreUnavailable is the 503 for a request with day or money
// budgets while the usage store is unreachable in fail-closed mode.
var errUsageStoreUnavailable = &apiError{Status: http.StatusServiceUnavailable, Code: CodeUsageStoreUnavailable,
	Message: "the usage store is unreachable, so the day and money budgets cannot be counted; try again shortly", RetryAfter: 1}

// requestID names x in a log line as its request-log row does: its trace
// id (the span's, or the client's traceparent), else its start time and key.
func (x *exchange) requestID() string {
	if x.span != nil {
		return x.span.TraceID()
	}
	if id := tracing.IncomingTraceID(x.r.Header); id != "" {
		return id
	}
	id := x.start.UTC().Format(time.RFC3339Nano)
	if x.key != nil {
		id += "/" + x.key.ID
	}
	return id
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
	switch {
	case b.Whole:
		msg = "this request's estimate of " + strconv.FormatInt(est, 10) + " tokens (input bytes ÷ 4 + 1600 a media part + the output bound × n)" +
			" is larger than the whole " + what + " budget of client key " + strconv.Quote(x.key.Name) + " (gate " + b.Gate + "): it can never fit; lower max_tokens"
	case est > 0:
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
	if b.Whole {
		msg = "this request's estimated cost of $" + limits.Micros(est).String() + " is larger than the whole USD budget of client key " +
			strconv.Quote(x.key.Name) + " (gate " + b.Gate + "): it can never fit; lower max_tokens"
	}
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
