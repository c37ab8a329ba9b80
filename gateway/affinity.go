package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/health"
	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// AffinityStore shares affinity bindings between replicas, by the 64-bit
// affinity key. It is asked only when this replica has no binding for a key,
// and told only of a new or moved binding (or one last shared more than
// half its TTL ago), so that an uncontended request costs it nothing. Its
// errors are ignored: affinity only orders candidates, and a lost binding
// costs one cache miss.
type AffinityStore interface {
	GetBinding(ctx context.Context, key uint64) (conn string, ok bool, err error)
	SetBinding(ctx context.Context, key uint64, conn string, ttl time.Duration) error
}

// localAffinity is the AffinityStore of a gateway alone: nothing shared.
type localAffinity struct{}

func (localAffinity) GetBinding(context.Context, uint64) (string, bool, error) { return "", false, nil }

func (localAffinity) SetBinding(context.Context, uint64, string, time.Duration) error { return nil }

// affinity is a request's session and its affinity binding (DESIGN.md,
// "Sessions"): which connection holds its prompt cache, and what the
// connection choice made of that.
type affinity struct {
	// session is the stored form of the session id (session.Hash), "" without one.
	session string
	// key is the affinity key; 0 when the request has none (Gemini, a
	// free route).
	key session.Key
	// result is what the choice did with the binding.
	result affinityResult
	// bound is the connection the key was bound to when the request came
	// ("" for none); looked: the binding was looked up (once a request);
	// waiting: the request is waiting at its bound connection's gates.
	bound   string
	looked  bool
	waiting bool
	// follow: the request follows a binding and is placed among the
	// sessions (placeNew) — it has a session id or continues a
	// conversation. A one-message request without a session id (a first
	// turn, or a one-off) is placed in the usual order, and only writes
	// the binding its next turn follows.
	follow bool
}

// affinityResult is the request log's and the metric's word for how a
// request's connection choice used its binding.
type affinityResult uint8

const (
	affinityNone    affinityResult = iota // no affinity key, or affinity off
	affinityHit                           // the bound connection served it
	affinityBound                         // no binding: one was written now
	affinitySpilled                       // bound elsewhere, served here (and bound here now)
)

// String is the result's label ("" for none in the request log).
func (r affinityResult) String() string {
	switch r {
	case affinityHit:
		return "hit"
	case affinityBound:
		return "bound"
	case affinitySpilled:
		return "spilled"
	}
	return ""
}

// sessionOf reads r's session id (headers, then the body's ids) and makes
// the request's affinity key. The session id itself is kept nowhere: only
// its hash, and the 64-bit affinity key.
func (x *exchange) sessionOf(r *http.Request) {
	if x.st == wire.Gemini || x.key == nil {
		return
	}
	id := session.ID(r.Header, x.info.PromptCacheKey, x.info.MetadataUserID)
	x.aff.session = session.Hash(x.key.ID, id)
	if !anyAffinity(x.targets) {
		return
	}
	sys, tools, first := x.info.Parts(x.body.Raw)
	x.aff.key = session.KeyOf(x.key.ID, x.info.Model, id, session.HashPrompt(sys, tools, first))
	x.aff.follow = id != "" || x.info.MultiTurn
}

// metricIndex is the result's place in metrics.AffinityResults.
func (r affinityResult) metricIndex() int {
	switch r {
	case affinityHit:
		return 0
	case affinityBound:
		return 1
	case affinitySpilled:
		return 2
	}
	return 3
}

// followBinding tries the connection the request's affinity key is bound to
// before the usual order, when it is among the candidates (serves the
// model, healthy, within its budgets, not tried yet) and takes part in
// affinity: admitted at once, or after waiting at its gates for at most
// affinityMaxWaitMs. done is false when the request goes on in the usual
// order (no binding, the bound connection is not a candidate, or it stayed
// full: spilled), with the bound connection left out of that order unless
// it is the only candidate. Affinity only orders the candidates: every gate,
// fair share, budget and deadline holds as without it.
func (x *exchange) followBinding() (aerr *apiError, done bool) {
	x.aff.looked = true
	g := x.g
	now := g.now()
	id, ok := g.bindings.Get(x.aff.key, now)
	if !ok {
		// Another replica may have served the session.
		if id, ok, _ = g.sharedAff.GetBinding(x.r.Context(), uint64(x.aff.key)); !ok {
			return nil, false
		}
		g.bindings.Adopt(x.aff.key, id, now)
	}
	x.aff.bound = id
	k := -1
	for j, i := range x.cand.idx[:x.cand.n] {
		if x.targets[i].c.id == id {
			k = j
			break
		}
	}
	if k < 0 {
		return nil, false
	}
	if c := x.targets[x.cand.idx[k]].c; !c.affinity || x.draining(c, now) {
		return nil, false
	}
	saved := x.cand
	x.cand.idx[0], x.cand.n = saved.idx[k], 1
	if aerr, ok := x.admitNow(); ok {
		return aerr, true
	}
	if x.s.eff.AffinityMaxWaitMs > 0 {
		x.aff.waiting = true
		aerr = x.queue()
		x.aff.waiting = false
		if x.cur.t != nil {
			return aerr, true
		}
		switch aerr {
		case errClientGone, errShuttingDown, errClusterUnavailable:
			return aerr, true
		}
	}
	// Spilled: the usual order, without the bound connection when there is another.
	x.cand = saved
	if x.cand.n > 1 {
		copy(x.cand.idx[k:], x.cand.idx[k+1:x.cand.n])
		x.cand.n--
	}
	return nil, false
}

// bindTo notes that c answered the request successfully: the affinity key is
// bound to c (or its binding refreshed) unless c opts out of affinity or is
// draining, and the result says how the choice went.
func (x *exchange) bindTo(c *conn) {
	if x.aff.key == 0 {
		return
	}
	now := x.g.now()
	if !c.affinity || x.draining(c, now) {
		x.aff.result = affinityNone
		return
	}
	if !x.aff.follow && x.g.bindings.Bound(x.aff.key, now) {
		// A one-off request writes the binding its next turn follows, once:
		// identical one-offs keep the first one (until it expires) rather
		// than moving it with every rotation.
		x.aff.result = affinityNone
		return
	}
	// A new binding is shared with the other replicas; a moved or stale one
	// only by a request that follows bindings (a one-off request, moved by
	// rotation each time, would otherwise write on every request).
	// It is written before the answer is relayed: the session's next turn
	// may reach another replica as soon as the client has this one.
	switch ch := x.g.bindings.Put(x.aff.key, c.id, now); {
	case ch == session.New, x.aff.follow && ch != session.Same:
		_ = x.g.sharedAff.SetBinding(x.r.Context(), uint64(x.aff.key), c.id, x.s.eff.AffinityTTL())
	}
	switch x.aff.bound {
	case c.id:
		x.aff.result = affinityHit
	case "":
		x.aff.result = affinityBound
	default:
		x.aff.result = affinitySpilled
	}
}

// draining reports whether c's usage windows are at or above its
// drainAtPercent: it takes no new binding, and its bound sessions move.
func (x *exchange) draining(c *conn, now time.Time) bool {
	return x.g.windowsSeen.Load() && c.health.WindowUsed(now) >= c.drainAt
}

// noteWindows keeps the usage windows h reports for c, and cools c until the
// reset when a window is used up or the upstream said rejected.
func (x *exchange) noteWindows(c *conn, h http.Header) {
	if x.rt.Free() {
		return
	}
	now := x.g.now()
	until, seen := c.health.ObserveWindows(h, now)
	if !seen {
		return
	}
	if !x.g.windowsSeen.Load() {
		x.g.windowsSeen.Store(true)
	}
	if used := c.health.WindowUsed(now); used >= c.drainAt {
		x.g.alertWindow(c, used, now)
	}
	if until.After(now) {
		x.coolConnection(c, now, until.Sub(now), health.ReasonUsageWindow)
	}
}

// placeNew orders the candidates of a request that follows no binding (a
// first turn, a spilled or moved session, a request without affinity):
// within each group of equal priority, the most headroom first (1 − the
// largest used fraction of the connection's usage windows; no window counts
// as 0 used), then, for a request that follows bindings, the fewest sessions
// bound or being bound (conn.placing), so that new sessions spread over the
// accounts even when they start together; the sort is stable,
// so rotation still breaks the remaining ties.
//
//go:noinline
func (x *exchange) placeNew() {
	n := x.cand.n
	if n < 2 {
		return
	}
	now := x.g.now()
	var ids [maxCandidates]string
	var bound [maxCandidates]int
	var room [maxCandidates]float64
	for k, i := range x.cand.idx[:n] {
		c := x.targets[i].c
		ids[k] = c.id
		room[k] = 1 - c.health.WindowUsed(now)
	}
	if x.aff.follow {
		x.g.bindings.Counts(ids[:n], bound[:n])
		for k, i := range x.cand.idx[:n] {
			bound[k] += int(x.targets[i].c.placing.Load())
		}
	}
	idx := x.cand.idx[:n]
	better := func(a, b int) bool {
		if pa, pb := x.targets[idx[a]].c.priority, x.targets[idx[b]].c.priority; pa != pb {
			return false // priority groups keep their order
		}
		if room[a] != room[b] {
			return room[a] > room[b]
		}
		return bound[a] < bound[b]
	}
	// Insertion sort: a handful of candidates, and stable.
	for k := 1; k < n; k++ {
		for j := k; j > 0 && better(j, j-1); j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
			room[j], room[j-1] = room[j-1], room[j]
			bound[j], bound[j-1] = bound[j-1], bound[j]
		}
	}
}

// anyAffinity reports whether a connection of ts takes part in affinity: when
// none does, the request needs no affinity key.
func anyAffinity(ts []*target) bool {
	for _, t := range ts {
		if t.c.affinity {
			return true
		}
	}
	return false
}
