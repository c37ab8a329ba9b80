package wire

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// A key's rate-limit headers, in canonical form (set into the map directly).
const (
	headerLimitRequests     = "X-Ratelimit-Limit-Requests"
	headerRemainingRequests = "X-Ratelimit-Remaining-Requests"
	headerResetRequests     = "X-Ratelimit-Reset-Requests"
	headerLimitTokens       = "X-Ratelimit-Limit-Tokens"
	headerRemainingTokens   = "X-Ratelimit-Remaining-Tokens"
	headerResetTokens       = "X-Ratelimit-Reset-Tokens"
)

// SetRateLimitHeaders describes a key's budgets b in h, in OpenAI's form:
// its rpm, and the tightest of its tpm and tpd.
func SetRateLimitHeaders(h http.Header, b map[string]live.Budget, now time.Time) {
	if r, ok := b[live.BudgetRPM]; ok {
		h[headerLimitRequests] = []string{strconv.FormatInt(r.Limit, 10)}
		h[headerRemainingRequests] = []string{strconv.FormatInt(max(r.Remaining, 0), 10)}
		h[headerResetRequests] = []string{OpenAIDuration(r.ResetAt.Sub(now))}
	}
	if t, ok := tightestTokens(b); ok {
		h[headerLimitTokens] = []string{strconv.FormatInt(t.Limit, 10)}
		h[headerRemainingTokens] = []string{strconv.FormatInt(max(t.Remaining, 0), 10)}
		h[headerResetTokens] = []string{OpenAIDuration(t.ResetAt.Sub(now))}
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

// OpenAIDuration writes d as OpenAI's reset headers do ("6m0s", "20ms",
// "1s"): Go's duration form, rounded up to the millisecond below a second
// and to the second above, never negative.
func OpenAIDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return ((d + time.Millisecond - 1) / time.Millisecond * time.Millisecond).String()
	}
	return ((d + time.Second - 1) / time.Second * time.Second).String()
}

// KeyLimits is GET /v1/gatehouse/limits: the key's limits as the API
// shows them (/api/v1/client-keys/{id}: absent keys absent), its class, what
// is left of each budget and when it resets, and its load on this replica.
type KeyLimits struct {
	ID       string                 `json:"id"`
	Name     string                 `json:"name"`
	Limits   limits.ClientKeyLimits `json:"limits"`
	Priority string                 `json:"priority"`
	Budgets  map[string]KeyBudget   `json:"budgets"`
	// BudgetsUSD are the money budgets set (budgetUsdDaily,
	// budgetUsdMonthly), in US dollars.
	BudgetsUSD       map[string]KeyUSD `json:"budgetsUsd,omitempty"`
	InFlight         int               `json:"inFlight"`
	Queued           int               `json:"queued"`
	QueuedByPriority map[string]int    `json:"queuedByPriority,omitempty"`
}

// KeyBudget is one of the key's budgets (rpm, tpm, tpd).
type KeyBudget struct {
	Limit     int64     `json:"limit"`
	Remaining int64     `json:"remaining"`
	ResetAt   time.Time `json:"resetAt"`
	// ResetIn is the time until ResetAt in OpenAI's form ("6m0s").
	ResetIn string `json:"resetIn"`
}

// KeyUSD is one of the key's money budgets; spend counts reservations
// of requests in flight.
type KeyUSD struct {
	LimitUSD     limits.Micros `json:"limitUsd"`
	RemainingUSD limits.Micros `json:"remainingUsd"`
	ResetAt      time.Time     `json:"resetAt"`
	ResetIn      string        `json:"resetIn"`
}
