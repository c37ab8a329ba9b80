package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
)

// Client signals (DESIGN.md, "Priority classes and client signals"): a key
// with rates or token budgets gets OpenAI-style X-RateLimit-* headers that
// describe its own limits on every /v1 answer, and GET /v1/gatehouse/limits
// tells an agent its limits, what is left of them and how busy it is, so it
// can park before it pays.

// The key's rate-limit headers, in canonical form (set into the map directly).
const (
	headerLimitRequests     = "X-Ratelimit-Limit-Requests"
	headerRemainingRequests = "X-Ratelimit-Remaining-Requests"
	headerResetRequests     = "X-Ratelimit-Reset-Requests"
	headerLimitTokens       = "X-Ratelimit-Limit-Tokens"
	headerRemainingTokens   = "X-Ratelimit-Remaining-Tokens"
	headerResetTokens       = "X-Ratelimit-Reset-Tokens"
)

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
	if r, ok := b[live.BudgetRPM]; ok {
		h[headerLimitRequests] = []string{strconv.FormatInt(r.Limit, 10)}
		h[headerRemainingRequests] = []string{strconv.FormatInt(max(r.Remaining, 0), 10)}
		h[headerResetRequests] = []string{openAIDuration(r.ResetAt.Sub(now))}
	}
	if t, ok := tightestTokens(b); ok {
		h[headerLimitTokens] = []string{strconv.FormatInt(t.Limit, 10)}
		h[headerRemainingTokens] = []string{strconv.FormatInt(max(t.Remaining, 0), 10)}
		h[headerResetTokens] = []string{openAIDuration(t.ResetAt.Sub(now))}
	}
}

// tightestTokens is the token budget of b with the least left (tpm or tpd;
// on a tie the one that resets later, which binds longer).
func tightestTokens(b map[string]live.Budget) (live.Budget, bool) {
	m, okM := b[live.BudgetTPM]
	d, okD := b[live.BudgetTPD]
	switch {
	case okM && okD:
		if d.Remaining < m.Remaining || d.Remaining == m.Remaining {
			return d, true
		}
		return m, true
	case okM:
		return m, true
	case okD:
		return d, true
	}
	return live.Budget{}, false
}

// openAIDuration writes d as OpenAI's reset headers do ("6m0s", "20ms",
// "1s"): Go's duration form, rounded up to the millisecond below a second
// and to the second above, never negative.
func openAIDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return ((d + time.Millisecond - 1) / time.Millisecond * time.Millisecond).String()
	}
	return ((d + time.Second - 1) / time.Second * time.Second).String()
}

// keyLimitsView is GET /v1/gatehouse/limits: the key's limits as the API
// shows them (/api/v1/client-keys/{id}: absent keys absent), its class, what
// is left of each budget and when it resets, and its load on this replica.
type keyLimitsView struct {
	ID       string                   `json:"id"`
	Name     string                   `json:"name"`
	Limits   limits.ClientKeyLimits   `json:"limits"`
	Priority string                   `json:"priority"`
	Budgets  map[string]keyBudgetView `json:"budgets"`
	// BudgetsUSD are the money budgets set (budgetUsdDaily,
	// budgetUsdMonthly), in US dollars.
	BudgetsUSD       map[string]keyUSDView `json:"budgetsUsd,omitempty"`
	InFlight         int                   `json:"inFlight"`
	Queued           int                   `json:"queued"`
	QueuedByPriority map[string]int        `json:"queuedByPriority,omitempty"`
}

// keyBudgetView is one of the key's budgets (rpm, tpm, tpd).
type keyBudgetView struct {
	Limit     int64     `json:"limit"`
	Remaining int64     `json:"remaining"`
	ResetAt   time.Time `json:"resetAt"`
	// ResetIn is the time until ResetAt in OpenAI's form ("6m0s").
	ResetIn string `json:"resetIn"`
}

// keyUSDView is one of the key's money budgets; spend counts reservations
// of requests in flight.
type keyUSDView struct {
	LimitUSD     limits.Micros `json:"limitUsd"`
	RemainingUSD limits.Micros `json:"remainingUsd"`
	ResetAt      time.Time     `json:"resetAt"`
	ResetIn      string        `json:"resetIn"`
}

// answerLimits answers GET /v1/gatehouse/limits for ks, returning
// errAnswered. Not inlined: it stays out of prepare's frame.
//
//go:noinline
func (x *exchange) answerLimits(w http.ResponseWriter, r *http.Request, ks *keyState) *apiError {
	now := x.g.now()
	v := keyLimitsView{ID: ks.id, Name: ks.name, Limits: ks.own, Priority: ks.priority.String(),
		Budgets: map[string]keyBudgetView{}, InFlight: int(ks.carry.inflight.Load()), Queued: ks.carry.queuedTotal()}
	for name, b := range ks.carry.rate.Budgets(&ks.lim, now) {
		v.Budgets[name] = keyBudgetView{Limit: b.Limit, Remaining: b.Remaining, ResetAt: b.ResetAt.UTC(), ResetIn: openAIDuration(b.ResetAt.Sub(now))}
	}
	if ks.lim.Spends() {
		b := ratelimit.Budget{DayID: ks.id, L: &ks.lim, R: &ks.carry.rate, U: x.g.keyUsage}
		sp := x.g.days.SpendOf(r.Context(), &b, now)
		v.BudgetsUSD = map[string]keyUSDView{}
		for name, sb := range ratelimit.SpendBudgets(&ks.lim, sp, now) {
			v.BudgetsUSD[name] = keyUSDView{LimitUSD: limits.Micros(sb.Limit), RemainingUSD: limits.Micros(sb.Remaining),
				ResetAt: sb.ResetAt, ResetIn: openAIDuration(sb.ResetAt.Sub(now))}
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
