package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/clientkey"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
)

// Client keys in the request flow: the key a request authenticated with
// heads its admission path (its gate, weight, class and wait bound), its
// rates and budgets are checked before it queues and its rpm turn is taken
// while it holds its permit. What a key is and carries lives in
// gateway/clientkey; in cluster mode the key gate goes through the shared
// admission like any gate and the key's rpm and tpm through the shared
// limits, under the store id key:<id> (gateway/cluster's doc).

// ClientKey is a client key as the gateway knows it (clientkey.Key).
type ClientKey = clientkey.Key

// AuthThrottle bounds failed client-key authentication (clientkey.Throttle).
type AuthThrottle = clientkey.Throttle

// applyKeys builds the key states of keys into s, carrying rate state and
// live counts over by id. g.applyMu must be held.
func (g *Gateway) applyKeys(s *state, keys []ClientKey) {
	set := clientkey.Apply(keys, g.keyCarries, g.metrics.Client, time.Now())
	s.keys, s.keyOrder = set.ByID, set.Order
	for _, ks := range set.Order {
		if ks.Gate.Key != "" {
			s.caps[ks.Gate.Key] = ks.Eff.MaxConcurrent
		}
	}
}

// keyOf returns the state of the key a request authenticated with: the
// configured one, or, for a key created after the config in force (found by
// Authenticate in the database), one built from what Authenticate returned
// — its rates count from the next reload on, which follows at once.
func (g *Gateway) keyOf(s *state, k ClientKey) *clientkey.State {
	if ks := s.keys[k.ID]; ks != nil {
		return ks
	}
	ks := clientkey.New(k, nil, g.metrics.Client(k.Name))
	ks.SetSpacing(time.Now())
	return ks
}

// allowedTargets returns the targets the key may use: all of them without
// a models list, else those whose provider and upstream id it allows.
func allowedTargets(ks *clientkey.State, ts []*target) []*target {
	if ks.Eff.Models.All() {
		return ts
	}
	var out []*target
	for _, t := range ts {
		if ks.Eff.Models.Allows(t.c.provider, t.model) {
			out = append(out, t)
		}
	}
	return out
}

// request is t's admission request for x's key: the key gate heads the path
// when the key has a cap, and the key's maxWaitMs bounds the wait when it is
// the smaller. It reuses x's path buffer: the request is handed to one
// Acquire at a time. A key without a cap keeps t's prepared request (its
// resolved path cached); a capped key's path is resolved per acquisition.
func (x *exchange) request(t *target) admission.Request {
	req := t.req
	req.Priority = x.priority
	ks := x.key
	if ks == nil {
		return req
	}
	if w := ks.Eff.MaxWait(); w > 0 && (req.MaxWait <= 0 || w < req.MaxWait) {
		req.MaxWait = w
	}
	if ks.Gate.Key != "" {
		// A new path: a Request of its own, not a copy of the prepared t.req,
		// whose cached resolution belongs to t.req's gates.
		x.path = append(append(x.pathBuf[:0], ks.Gate), t.req.Gates...)
		req = admission.Request{Gates: x.path, MaxWait: req.MaxWait, QueueKey: req.QueueKey, MaxQueueDepth: req.MaxQueueDepth,
			Priority: x.priority}
	}
	req.Client, req.Weight = ks.ID, ks.Eff.Weight
	return req
}

// keyBlocked is the 429 for a key whose tpm window or tpd budget is spent,
// or whose money budget has too little left for the request's estimated
// cost at the lowest price among its targets (no failover: the limit is the
// client's), or nil. It runs before the request queues: a spent key is
// answered at once, not after a wait for a permit it could not use.
func (x *exchange) keyBlocked() *apiError {
	ks := x.key
	now := x.g.now()
	if ks.Lim.CountsTokens() {
		if b, never := ks.Lim.TooLarge(x.estimate(), 0, now); never {
			return x.errKeyBudget(b, x.estimate(), now)
		}
	}
	if ks.Lim.Budgeted() {
		if b, blocked := x.g.limiter.Blocked(x.r.Context(), ks.StoreID, &ks.Lim, &ks.Carry.Rate, now); blocked {
			return x.errKeyBudget(b, 0, now)
		}
	}
	if ks.Lim.Spends() {
		cost := x.cheapestCost()
		if b, never := ks.Lim.TooLarge(0, cost, now); never {
			return x.errKeyBudget(b, cost, now)
		}
		if b, blocked := ks.Carry.Rate.SpendBlocked(&ks.Lim, cost, now); blocked {
			return x.errKeyBudget(b, cost, now)
		}
	}
	return nil
}

// cheapestCost is x's estimate's cost (micro-dollars) at the lowest price
// among its targets; 0 without targets or prices.
func (x *exchange) cheapestCost() int64 {
	in, out := x.estimateParts()
	cost := int64(-1)
	for _, t := range x.targets {
		if c := ratelimit.EstimateCost(t.rate, in, out); cost < 0 || c < cost {
			cost = c
		}
	}
	return max(cost, 0)
}

// keyTurnFirst takes the key's rpm dispatch turn for the attempt to
// come, before the request enters any shared gate, so that a key pacing
// itself never holds a connection's slot while it waits (a batch key with
// rpm 6 never keeps another tenant off an idle upstream). It does nothing
// for a key without rpm, a route that takes no slot, or while x holds a
// turn not yet used. The wait is bounded by the longest admission wait
// among x's candidates.
func (x *exchange) keyTurnFirst() *apiError {
	if x.key == nil || x.key.Lim.Spacing == 0 || x.rt.Free() || x.kturn.Held() {
		return nil
	}
	return x.keyTurn(time.Now(), x.keyWaitBound())
}

// keyWaitBound is the longest admission wait among x's candidates, as
// x.request bounds it (0: one of them has none).
func (x *exchange) keyWaitBound() time.Duration {
	var w time.Duration
	kw := x.key.Eff.MaxWait()
	for _, t := range x.targets {
		mw := t.req.MaxWait
		if kw > 0 && (mw <= 0 || kw < mw) {
			mw = kw
		}
		if mw <= 0 {
			return 0
		}
		w = max(w, mw)
	}
	return w
}

// keyTurn waits for the key's rpm dispatch turn, within the deadline its
// wait started at start (maxWait its bound, 0 = none); a turn that cannot
// come in time is given back and answered with 429 RATE_LIMIT_RPM (gate
// key-rpm:<id>).
func (x *exchange) keyTurn(start time.Time, maxWait time.Duration) *apiError {
	ks := x.key
	t := x.g.limiter.Turn(x.r.Context(), ks.StoreID, &ks.Carry.Rate, ks.Lim.Spacing, start, maxWait)
	switch t.Verdict {
	case ratelimit.TurnTooLate:
		return x.errKeyTurnTooLate(ks, t.Wait, maxWait, acrossReplicas(t))
	case ratelimit.TurnGone:
		return errClientGone
	}
	x.waited += t.Waited
	x.kturn = t
	return nil
}

// errKeyTurnTooLate is the 429 RATE_LIMIT_RPM for ks's dispatch turn that
// comes d from now, after the request's wait bound maxWait; where says
// whose spacing it is ("" or " across all replicas").
func (x *exchange) errKeyTurnTooLate(ks *clientkey.State, d, maxWait time.Duration, where string) *apiError {
	x.g.metrics.RateRejected(live.BudgetRPM)
	return &apiError{Status: http.StatusTooManyRequests, Code: CodeRateLimitRPM,
		Message: "client key " + strconv.Quote(ks.Name) + " may dispatch one request every " + ks.Lim.Spacing.String() +
			" (rpm)" + where + ", and its next turn comes after the wait bound of " + maxWait.String(),
		RetryAfter: ceilSeconds(d), Gate: ks.Lim.SpacingGate}
}

// countKeyDispatch counts the request about to go upstream in its key's
// minute (the rpm display count); its tokens are reserved beforehand.
func (x *exchange) countKeyDispatch() {
	ks := x.key
	if ks.Lim.Any() {
		ks.Carry.Rate.CountDispatch(&ks.Lim, x.g.now())
	}
}

// countClient counts the answered request for its key's metrics.
func (x *exchange) countClient() {
	if x.key == nil || x.status == 0 {
		return
	}
	x.key.Metrics.Request(x.status)
}
