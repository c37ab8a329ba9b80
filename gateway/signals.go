package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// Client signals (DESIGN.md, "Priority classes and client signals"): a key
// with rates or token budgets gets OpenAI-style X-RateLimit-* headers that
// describe its own limits on every /v1 answer, and GET /v1/gatehouse/limits
// tells an agent its limits, what is left of them and how busy it is, so it
// can park before it pays.

// limitsPath is the path of the key's own limits.
const limitsPath = "/v1/gatehouse/limits"

// hasSignals reports whether ks has a rate or token budget to describe.
func (ks *keyState) hasSignals() bool {
	return ks != nil && (ks.lim.RPM > 0 || ks.lim.TPM > 0 || ks.lim.TPD > 0)
}

// setRateLimitHeaders describes x's key's rpm and the tightest of its tpm
// and tpd in h, in OpenAI's form; nothing for a key without them.
func (x *exchange) setRateLimitHeaders(h http.Header) {
	ks := x.key
	if !ks.hasSignals() {
		return
	}
	now := x.g.now()
	b := ks.carry.rate.Budgets(&ks.lim, now)
	// What is left besides this request: its own reservation, held while
	// it is answered, is not yet spent.
	if own := x.resv.Holding(&ks.carry.rate); own > 0 {
		for _, k := range []string{live.BudgetTPM, live.BudgetTPD} {
			if v, ok := b[k]; ok {
				v.Remaining += own
				b[k] = v
			}
		}
	}
	wire.SetRateLimitHeaders(h, b, now)
}

// answerLimits answers GET /v1/gatehouse/limits for ks, returning
// errAnswered. Not inlined: it stays out of prepare's frame.
//
//go:noinline
func (x *exchange) answerLimits(w http.ResponseWriter, r *http.Request, ks *keyState) *apiError {
	now := x.g.now()
	v := wire.KeyLimits{ID: ks.id, Name: ks.name, Limits: ks.own, Priority: ks.priority.String(),
		Budgets: map[string]wire.KeyBudget{}, InFlight: int(ks.carry.inflight.Load()), Queued: ks.carry.queuedTotal()}
	for name, b := range ks.carry.rate.Budgets(&ks.lim, now) {
		v.Budgets[name] = wire.KeyBudget{Limit: b.Limit, Remaining: b.Remaining, ResetAt: b.ResetAt.UTC(), ResetIn: wire.OpenAIDuration(b.ResetAt.Sub(now))}
	}
	if ks.lim.Spends() {
		b := ratelimit.Budget{DayID: ks.id, L: &ks.lim, R: &ks.carry.rate, U: x.g.keyUsage}
		sp := x.g.days.SpendOf(r.Context(), &b, now)
		v.BudgetsUSD = map[string]wire.KeyUSD{}
		for name, sb := range ratelimit.SpendBudgets(&ks.lim, sp, now) {
			v.BudgetsUSD[name] = wire.KeyUSD{LimitUSD: limits.Micros(sb.Limit), RemainingUSD: limits.Micros(sb.Remaining),
				ResetAt: sb.ResetAt, ResetIn: wire.OpenAIDuration(sb.ResetAt.Sub(now))}
		}
	}
	v.QueuedByPriority = ks.carry.queuedByPriority()
	body, _ := json.Marshal(v) // ints, strings, times and string maps: cannot fail
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	h["Cache-Control"] = []string{"no-store"}
	h[HeaderQueueMs] = x.g.zeroMs
	x.setRateLimitHeaders(h)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(append(body, '\n'))
	}
	return errAnswered
}
