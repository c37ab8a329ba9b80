package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/clientkey"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// Client signals (DESIGN.md, "Priority classes and client signals"): a key
// with rates or token budgets gets OpenAI-style X-RateLimit-* headers that
// describe its own limits on every /v1 answer, and GET /v1/gatehouse/limits
// tells an agent its limits, what is left of them and how busy it is, so it
// can park before it pays.

// setRateLimitHeaders describes x's key's rpm and the tightest of its tpm
// and tpd in h, in OpenAI's form; nothing for a key without them. The rpm's
// remaining is 1 when the key's next dispatch turn is now and 0 otherwise,
// its reset the time until that turn.
func (x *exchange) setRateLimitHeaders(h http.Header) {
	ks := x.key
	if !ks.HasSignals() {
		return
	}
	now := x.g.now()
	b := ks.Carry.Rate.Budgets(&ks.Lim, now)
	// What is left besides this request: its own reservation, held while
	// it is answered, is not yet spent.
	if own := x.resv.Holding(&ks.Carry.Rate); own > 0 {
		for _, k := range []string{live.BudgetTPM, live.BudgetTPD} {
			if v, ok := b[k]; ok {
				v.Remaining += own
				b[k] = v
			}
		}
	}
	if rpm, ok := b[live.BudgetRPM]; ok && ks.Lim.Spacing > 0 {
		// The key's rpm is a spacing, not a count per minute: one request may
		// go when its next turn is now, none until then.
		d := x.g.limiter.TurnDelay(&ks.Carry.Rate, time.Now())
		rpm.Remaining, rpm.ResetAt = 0, now.Add(d)
		if d == 0 {
			rpm.Remaining = 1
		}
		b[live.BudgetRPM] = rpm
	}
	wire.SetRateLimitHeaders(h, b, now)
}

// answerLimits answers GET /v1/gatehouse/limits for ks, returning
// errAnswered. Not inlined: it stays out of prepare's frame.
//
//go:noinline
func (x *exchange) answerLimits(w http.ResponseWriter, r *http.Request, ks *clientkey.State) *apiError {
	now := x.g.now()
	var sp ratelimit.Spend
	if ks.Lim.Spends() {
		sp = x.g.days.SpendOf(r.Context(), &ratelimit.Budget{DayID: ks.ID, L: &ks.Lim, R: &ks.Carry.Rate, U: x.g.keyUsage}, now)
	}
	v := ks.Limits(now, sp)
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
