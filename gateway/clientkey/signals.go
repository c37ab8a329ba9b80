package clientkey

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// HeaderPriority is the request header that lowers a request's class
// (DESIGN.md, "Priority classes and client signals"); in canonical form, so
// that the header map is indexed without canonicalising.
const HeaderPriority = "X-Gatehouse-Priority"

// RequestPriority is the class of a request of ks with header h: the key's
// own, or the lower one X-Gatehouse-Priority names. A header that names an
// unknown class, comes twice or names a class above the key's is refused
// with a message for the 400.
func (ks *State) RequestPriority(h http.Header) (admission.Priority, string) {
	v := h[HeaderPriority]
	if len(v) == 0 {
		return ks.Priority, ""
	}
	p, ok := admission.ParsePriority(v[0])
	if !ok || len(v) > 1 {
		return ks.Priority, HeaderPriority + " must be one of interactive, standard, batch (once); got " + strconv.Quote(v[0])
	}
	if p < ks.Priority {
		return ks.Priority, HeaderPriority + ": " + p.String() + " is above the " + ks.Priority.String() +
			" class of client key " + strconv.Quote(ks.Name) + "; a request may only lower its class"
	}
	return p, ""
}

// Limits is the GET /v1/gatehouse/limits body for ks at now: its limits as
// configured, what is left of its rates and token budgets, and, for a key
// with money budgets, what is left of them after sp, its spend.
func (ks *State) Limits(now time.Time, sp ratelimit.Spend) wire.KeyLimits {
	v := wire.KeyLimits{ID: ks.ID, Name: ks.Name, Limits: ks.Own, Priority: ks.Priority.String(),
		Budgets: map[string]wire.KeyBudget{}, InFlight: int(ks.Carry.InFlight.Load()), Queued: ks.Carry.QueuedTotal()}
	for name, b := range ks.Carry.Rate.Budgets(&ks.Lim, now) {
		v.Budgets[name] = wire.KeyBudget{Limit: b.Limit, Remaining: b.Remaining, ResetAt: b.ResetAt.UTC(), ResetIn: wire.OpenAIDuration(b.ResetAt.Sub(now))}
	}
	if ks.Lim.Spends() {
		v.BudgetsUSD = map[string]wire.KeyUSD{}
		for name, sb := range ratelimit.SpendBudgets(&ks.Lim, sp, now) {
			v.BudgetsUSD[name] = wire.KeyUSD{LimitUSD: limits.Micros(sb.Limit), RemainingUSD: limits.Micros(sb.Remaining),
				ResetAt: sb.ResetAt, ResetIn: wire.OpenAIDuration(sb.ResetAt.Sub(now))}
		}
	}
	v.QueuedByPriority = ks.Carry.QueuedByPriority()
	return v
}
