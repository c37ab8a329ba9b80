// Package clientkey holds client keys as the gateway serves them (DESIGN.md,
// "Client keys: identity, limits and fair share"): every request carries
// the key it authenticated with. A key may be disabled, may allow only some
// models, may cap its requests in flight (the gate key:<id> at the head of
// every path of that key), may bound its own wait, and has rates of its
// own: rpm as a dispatch spacing (key-rpm:<id>), a tpm window (key-tpm:<id>)
// and tpd per UTC day (key-tpd:<id>). Its weight is its share of every
// saturated gate against the other keys waiting there, FIFO within the key;
// its class is its priority there (docs/ADMISSION.md). A key's limits are
// the client's, not a connection's: they never fail over.
//
// The package owns a key's prepared state (State), what that state carries
// from one config to the next (Carry: rate state, requests in flight and
// waiting), reading a request's key and class from its headers, the failed
// authentication throttle's interface, and what the live view and GET
// /v1/gatehouse/limits say about a key. It never authenticates (the
// gateway's Options.Authenticate does), never admits, waits or answers a
// request, and never talks to a store: the gateway's request flow does all
// of that with what this package prepares.
package clientkey

import (
	"cmp"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/metrics"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
)

// Key is a client key as the gateway knows it: who it is and its own
// limits. The gateway's Options.Authenticate returns one per request; its
// Config.ClientKeys lists every key (the caps and live view come from there).
type Key struct {
	ID      string
	Name    string
	Enabled bool
	Limits  limits.ClientKeyLimits
}

// GateKey is the gate that heads every path of a key with maxConcurrent.
func GateKey(id string) string { return "key:" + id }

// NumPriorities is the number of classes (admission.Priorities).
const NumPriorities = len(admission.Priorities)

// PriorityIndex is p's position in admission.Priorities (0 interactive).
func PriorityIndex(p admission.Priority) int {
	for i, q := range admission.Priorities {
		if q == p {
			return i
		}
	}
	return 1
}

// Carry is what a key's state carries over from one config to the next
// (by key id), like ratelimit.State for a connection.
type Carry struct {
	Rate     ratelimit.State
	InFlight atomic.Int64                // requests of the key holding a permit
	Queued   [NumPriorities]atomic.Int64 // requests of the key waiting for admission, by class (PriorityIndex)
}

// QueuedByPriority is the key's waiting requests by class name, nil when none wait.
func (c *Carry) QueuedByPriority() map[string]int {
	var out map[string]int
	for i, p := range admission.Priorities {
		if n := c.Queued[i].Load(); n > 0 {
			if out == nil {
				out = make(map[string]int, NumPriorities)
			}
			out[p.String()] = int(n)
		}
	}
	return out
}

// QueuedTotal is the key's requests waiting for admission, every class.
func (c *Carry) QueuedTotal() int {
	n := int64(0)
	for i := range c.Queued {
		n += c.Queued[i].Load()
	}
	return int(n)
}

// State is a client key prepared for the hot path.
type State struct {
	ID, Name string
	Eff      limits.EffectiveClientKey
	Gate     admission.GateRef // key:<id>; Key "" when the key has no cap
	Lim      ratelimit.Limits  // rpm spacing, tpm and tpd of the key, with key-* gate names
	// StoreID names the key's rpm turn and tpm window in the shared rate-limit
	// store, apart from connection ids (key:<id>); "" when it has neither.
	StoreID  string
	Priority admission.Priority     // the key's class (limits "priority")
	Own      limits.ClientKeyLimits // the key's limits as configured (GET /v1/gatehouse/limits)
	Carry    *Carry
	Metrics  *metrics.Client
}

// withCarry is a key state and a fresh carry in one allocation.
type withCarry struct {
	ks    State
	carry Carry
}

// New builds the state of k with carry (nil: a fresh one) and m, the key's
// pre-bound metrics. The rpm spacing is not set: Apply sets it, or the
// caller with SetSpacing.
func New(k Key, carry *Carry, m *metrics.Client) *State {
	var ks *State
	if carry == nil {
		kc := &withCarry{}
		ks, carry = &kc.ks, &kc.carry
	} else {
		ks = &State{}
	}
	*ks = State{ID: k.ID, Name: k.Name, Eff: k.Limits.Effective(), Carry: carry, Metrics: m}
	ks.Lim = ratelimit.ForClientKey(k.ID, ks.Eff)
	ks.Priority, _ = admission.ParsePriority(ks.Eff.Priority) // fail-open: limits let only admission's names through
	ks.Own = k.Limits
	if ks.Eff.MaxConcurrent > 0 {
		ks.Gate = admission.GateRef{Level: live.LevelKey, Key: GateKey(k.ID)}
	}
	if ks.Lim.Spacing > 0 || ks.Lim.TPM > 0 {
		ks.StoreID = cmp.Or(ks.Gate.Key, GateKey(k.ID))
	}
	return ks
}

// SetSpacing starts the key's rpm spacing at now.
func (ks *State) SetSpacing(now time.Time) { ks.Carry.Rate.SetSpacing(ks.Lim.Spacing, now) }

// Set is the keys of one config: by id and in config order.
type Set struct {
	ByID  map[string]*State
	Order []*State
}

// Apply builds the states of keys, carrying rate state and live counts over
// by id from carries, which it updates: a new key's carry is added, a gone
// key's dropped. A key without an id, or with one seen before, is skipped.
// metric gives a key's pre-bound metrics by name.
func Apply(keys []Key, carries map[string]*Carry, metric func(name string) *metrics.Client, now time.Time) Set {
	set := Set{ByID: make(map[string]*State, len(keys))}
	for _, k := range keys {
		if k.ID == "" || set.ByID[k.ID] != nil {
			continue
		}
		ks := New(k, carries[k.ID], metric(k.Name))
		carries[k.ID] = ks.Carry
		ks.SetSpacing(now)
		set.ByID[k.ID] = ks
		set.Order = append(set.Order, ks)
	}
	for id := range carries {
		if set.ByID[id] == nil {
			delete(carries, id)
		}
	}
	return set
}

// HasSignals reports whether ks has a rate or token budget to describe in
// X-RateLimit-* headers.
func (ks *State) HasSignals() bool {
	return ks != nil && (ks.Lim.RPM > 0 || ks.Lim.TPM > 0 || ks.Lim.TPD > 0)
}

// Live lists the keys of order for the live view, with the admitted and
// timed-out counts of each key's gate from stats (by gate key).
func Live(order []*State, stats map[string]admission.GateStats) []live.Client {
	out := make([]live.Client, 0, len(order))
	for _, ks := range order {
		c := live.Client{ID: ks.ID, Name: ks.Name, Weight: ks.Eff.Weight, Cap: ks.Eff.MaxConcurrent,
			Priority: ks.Priority.String(), InFlight: int(ks.Carry.InFlight.Load()), Queued: ks.Carry.QueuedTotal()}
		c.QueuedByPriority = ks.Carry.QueuedByPriority()
		if st, ok := stats[ks.Gate.Key]; ok && ks.Gate.Key != "" {
			c.Admitted, c.Timeouts = st.Admitted, st.Timeouts
		}
		out = append(out, c)
	}
	return out
}

// Secret returns the client's secret from Authorization: Bearer or
// x-api-key, "" when neither carries one.
func Secret(h http.Header) string {
	if v := h["Authorization"]; len(v) > 0 {
		if len(v[0]) > 7 && strings.EqualFold(v[0][:7], "bearer ") {
			return strings.TrimSpace(v[0][7:])
		}
	}
	if v := h["X-Api-Key"]; len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	return ""
}

// Throttle counts failed client-key authentications per client address
// (DESIGN.md: 20 free failures, then 429 with Retry-After). The gateway
// checks a key first and serves a valid one whatever its address; for an
// invalid key it asks Wait — a positive wait is answered 429 AUTH_THROTTLED
// without counting — and otherwise reports it to Failed (401). A missing key
// is not a guess and is not counted. Implementations know how to find
// a request's client address (trusted proxies); cmd wires the dashboard's.
type Throttle interface {
	Wait(r *http.Request) time.Duration
	Failed(r *http.Request)
}

// NoThrottle is the Throttle of a gateway given none.
type NoThrottle struct{}

func (NoThrottle) Wait(*http.Request) time.Duration { return 0 }
func (NoThrottle) Failed(*http.Request)             {}
