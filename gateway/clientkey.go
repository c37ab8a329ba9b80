package gateway

import (
	"cmp"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/metrics"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
)

// Client keys as tenants (DESIGN.md, "Client keys: identity, limits and fair
// share"): every request carries the key it authenticated with. A key may
// be disabled (403 KEY_DISABLED), may allow only some models (403
// MODEL_NOT_ALLOWED), may cap its requests in flight (the gate key:<id> at
// the head of every path of that key), may bound its own wait, and has rates
// of its own: rpm as a dispatch spacing (key-rpm:<id>), a tpm window
// (key-tpm:<id>) and tpd per UTC day in the KeyUsage store (key-tpd:<id>).
// Its weight is its share of every saturated gate against the other keys
// waiting there, FIFO within the key (admission.Request's Client and Weight;
// docs/ADMISSION.md, "Fair share across client keys"). A key's limits are
// the client's, not a connection's: they never fail over. They reuse the
// connections' machinery (ratelimit.Limits, ratelimit.State, the limiter) and, in
// cluster mode, the key gate goes through the shared admission like any
// gate and the key's rpm and tpm through the shared limits, under the store
// id key:<id> (see docs/ARCHITECTURE.md).

// Error codes of client keys.
const (
	CodeKeyDisabled     = "KEY_DISABLED"
	CodeModelNotAllowed = "MODEL_NOT_ALLOWED"
)

// ClientKey is a client key as the gateway knows it: who it is and its own
// limits. Options.Authenticate returns one per request; Config.ClientKeys
// lists every key (the gateway's caps and live view come from there).
type ClientKey struct {
	ID      string
	Name    string
	Enabled bool
	Limits  limits.ClientKeyLimits
}

// keyGateKey is the gate that heads every path of a key with maxConcurrent.
func keyGateKey(id string) string { return "key:" + id }

// keyCarry is what a key's state carries over from one config to the next
// (by key id), like ratelimit.State for a connection.
type keyCarry struct {
	rate     ratelimit.State
	inflight atomic.Int64                // requests of the key holding a permit
	queued   [numPriorities]atomic.Int64 // requests of the key waiting for admission, by class (priorityIndex)
}

// queuedByPriority is the key's waiting requests by class name, nil when none wait.
func (c *keyCarry) queuedByPriority() map[string]int {
	var out map[string]int
	for i, p := range admission.Priorities {
		if n := c.queued[i].Load(); n > 0 {
			if out == nil {
				out = make(map[string]int, numPriorities)
			}
			out[p.String()] = int(n)
		}
	}
	return out
}

// queuedTotal is the key's requests waiting for admission, every class.
func (c *keyCarry) queuedTotal() int {
	n := int64(0)
	for i := range c.queued {
		n += c.queued[i].Load()
	}
	return int(n)
}

// keyState is a client key prepared for the hot path.
type keyState struct {
	id, name string
	eff      limits.EffectiveClientKey
	gate     admission.GateRef // key:<id>; Key "" when the key has no cap
	lim      ratelimit.Limits  // rpm spacing, tpm and tpd of the key, with key-* gate names
	// storeID names the key's rpm turn and tpm window in the shared rate-limit
	// store, apart from connection ids (key:<id>); "" when it has neither.
	storeID  string
	priority admission.Priority     // the key's class (limits "priority")
	own      limits.ClientKeyLimits // the key's limits as configured (GET /v1/gatehouse/limits)
	carry    *keyCarry
	metrics  *metrics.Client
}

// keyWithCarry is a key state and a fresh carry in one allocation.
type keyWithCarry struct {
	ks    keyState
	carry keyCarry
}

// prepareKey builds the state of k, with carry (nil: a fresh one).
func (g *Gateway) prepareKey(k ClientKey, carry *keyCarry) *keyState {
	var ks *keyState
	if carry == nil {
		kc := &keyWithCarry{}
		ks, carry = &kc.ks, &kc.carry
	} else {
		ks = &keyState{}
	}
	*ks = keyState{id: k.ID, name: k.Name, eff: k.Limits.Effective(), carry: carry,
		metrics: g.metrics.Client(k.Name)}
	ks.lim = ratelimit.ForClientKey(k.ID, ks.eff)
	ks.priority = keyPriority(ks.eff.Priority)
	ks.own = k.Limits
	if ks.eff.MaxConcurrent > 0 {
		ks.gate = admission.GateRef{Level: live.LevelKey, Key: keyGateKey(k.ID)}
	}
	if ks.lim.Spacing > 0 || ks.lim.TPM > 0 {
		ks.storeID = cmp.Or(ks.gate.Key, keyGateKey(k.ID))
	}
	return ks
}

// applyKeys builds the key states of cfg into s, carrying rate state and
// live counts over by id. g.applyMu must be held.
func (g *Gateway) applyKeys(s *state, keys []ClientKey) {
	now := time.Now()
	s.keys = make(map[string]*keyState, len(keys))
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if k.ID == "" || seen[k.ID] {
			continue
		}
		seen[k.ID] = true
		ks := g.prepareKey(k, g.keyCarries[k.ID])
		g.keyCarries[k.ID] = ks.carry
		ks.carry.rate.SetSpacing(ks.lim.Spacing, now)
		s.keys[k.ID] = ks
		s.keyOrder = append(s.keyOrder, ks)
		if ks.gate.Key != "" {
			s.caps[ks.gate.Key] = ks.eff.MaxConcurrent
		}
	}
	for id := range g.keyCarries {
		if !seen[id] {
			delete(g.keyCarries, id)
		}
	}
}

// keyOf returns the state of the key a request authenticated with: the
// configured one, or, for a key created after the config in force (found by
// Authenticate in the database), one built from what Authenticate returned
// — its rates count from the next reload on, which follows at once.
func (g *Gateway) keyOf(s *state, k ClientKey) *keyState {
	if ks := s.keys[k.ID]; ks != nil {
		return ks
	}
	ks := g.prepareKey(k, nil)
	ks.carry.rate.SetSpacing(ks.lim.Spacing, time.Now())
	return ks
}

// allowedTargets returns the targets the key may use: all of them without
// a models list, else those whose provider and upstream id it allows.
func (ks *keyState) allowedTargets(ts []*target) []*target {
	if ks.eff.Models.All() {
		return ts
	}
	var out []*target
	for _, t := range ts {
		if ks.eff.Models.Allows(t.c.provider, t.model) {
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
	if w := ks.eff.MaxWait(); w > 0 && (req.MaxWait <= 0 || w < req.MaxWait) {
		req.MaxWait = w
	}
	if ks.gate.Key != "" {
		// A new path: a Request of its own, not a copy of the prepared t.req,
		// whose cached resolution belongs to t.req's gates.
		x.path = append(append(x.pathBuf[:0], ks.gate), t.req.Gates...)
		req = admission.Request{Gates: x.path, MaxWait: req.MaxWait, QueueKey: req.QueueKey, MaxQueueDepth: req.MaxQueueDepth,
			Priority: x.priority}
	}
	req.Client, req.Weight = ks.id, ks.eff.Weight
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
	if ks.lim.Budgeted() {
		if b, blocked := x.g.limiter.Blocked(x.r.Context(), ks.storeID, &ks.lim, &ks.carry.rate, now); blocked {
			return x.errKeyBudget(b, 0, now)
		}
	}
	if ks.lim.Spends() {
		cost := x.cheapestCost()
		if b, blocked := ks.carry.rate.SpendBlocked(&ks.lim, cost, now); blocked {
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

// keyTurn waits for the key's rpm dispatch turn while x holds its permit,
// within the deadline its admission wait started at start (maxWait its
// bound, 0 = none); a turn that cannot come in time is given back and
// answered with 429 RATE_LIMIT_RPM (gate key-rpm:<id>).
func (x *exchange) keyTurn(start time.Time, maxWait time.Duration) *apiError {
	ks := x.key
	t := x.g.limiter.Turn(x.r.Context(), ks.storeID, &ks.carry.rate, ks.lim.Spacing, start, maxWait)
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
func (x *exchange) errKeyTurnTooLate(ks *keyState, d, maxWait time.Duration, where string) *apiError {
	x.g.metrics.RateRejected(live.BudgetRPM)
	return &apiError{Status: http.StatusTooManyRequests, Code: CodeRateLimitRPM,
		Message: "client key " + strconv.Quote(ks.name) + " may dispatch one request every " + ks.lim.Spacing.String() +
			" (rpm)" + where + ", and its next turn comes after the wait bound of " + maxWait.String(),
		RetryAfter: ceilSeconds(d), Gate: ks.lim.SpacingGate}
}

// countKeyDispatch counts the request about to go upstream in its key's
// minute (the rpm display count); its tokens are reserved beforehand.
func (x *exchange) countKeyDispatch() {
	ks := x.key
	if ks.lim.Any() {
		ks.carry.rate.CountDispatch(&ks.lim, x.g.now())
	}
}

// liveClients lists every configured key for the live view, by name.
func (s *state) liveClients(stats map[string]admission.GateStats) []live.Client {
	out := make([]live.Client, 0, len(s.keyOrder))
	for _, ks := range s.keyOrder {
		c := live.Client{ID: ks.id, Name: ks.name, Weight: ks.eff.Weight, Cap: ks.eff.MaxConcurrent,
			Priority: ks.priority.String(), InFlight: int(ks.carry.inflight.Load()), Queued: ks.carry.queuedTotal()}
		c.QueuedByPriority = ks.carry.queuedByPriority()
		if st, ok := stats[ks.gate.Key]; ok && ks.gate.Key != "" {
			c.Admitted, c.Timeouts = st.Admitted, st.Timeouts
		}
		out = append(out, c)
	}
	return out
}

// countClient counts the answered request for its key's metrics.
func (x *exchange) countClient() {
	if x.key == nil || x.status == 0 {
		return
	}
	x.key.metrics.Request(x.status)
}
