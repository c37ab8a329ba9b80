package cluster

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// SetCaps applies the full set of caps from a config snapshot, keyed by gate
// key, as admission.Controller.SetCaps does. Caps are per replica: every
// replica applies the same snapshot (config reaches each one through
// Postgres NOTIFY) and sends its caps with every attempt, so Redis holds only
// leases and queues. A raised or removed cap wakes this replica's waiters on
// the gate; a lowered cap admits nobody until the cluster-wide count is
// below it. The fallback controller gets each cap divided by the live
// replicas.
//
// A gate whose cap is at or above an enclosing gate's (ledgerCaps) is
// treated as uncapped in Redis: it can never be the gate that binds.
//
// A gate that becomes capped counts the permits already running through it:
// they took no lease there while it was uncapped (see admit), so their
// leases are entered now, before SetCaps returns.
func (c *Controller) SetCaps(caps map[string]int) {
	if enter := c.setCaps(caps); len(enter) > 0 {
		c.enterLeases(enter)
	}
}

// setCaps is SetCaps under c.mu; it returns the leases to enter on gates
// that became capped.
func (c *Controller) setCaps(caps map[string]int) []entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.caps = make(map[string]int, len(caps))
	for k, v := range caps {
		if v > 0 {
			c.caps[k] = v
		}
	}
	ledger := ledgerCaps(c.caps)
	resubscribe := false
	var capped []*gateState
	for key, g := range c.gates {
		next := ledger[key]
		if next == g.cap {
			continue
		}
		raised := next == 0 || (g.cap != 0 && next > g.cap)
		if g.cap == 0 {
			capped = append(capped, g)
		}
		resubscribe = resubscribe || next == 0 || g.cap == 0
		g.setCap(next)
		if raised {
			// Counted as a wake-up: a waiter whose acquire script ran under
			// the old cap and that parks only after this sees it missed one.
			g.wakes++
			g.kickHeads()
		}
	}
	for key, cp := range ledger {
		if c.gates[key] == nil {
			g := c.newGate("", key)
			g.setCap(cp)
			c.gates[key] = g
			resubscribe = true
		}
	}
	for key, g := range c.gates {
		if g.cap == 0 && g.held == 0 && g.waiting == 0 && g.pending == 0 {
			delete(c.gates, key)
		}
	}
	c.fallback.SetCaps(c.sharedCaps())
	if resubscribe {
		select {
		case c.subSync <- struct{}{}:
		default:
		}
	}
	return c.unleasedOn(capped)
}

// sharedCaps is this replica's share of every cap while Redis is away: the
// cap divided by the live replicas last seen, at least 1. c.mu must be held.
func (c *Controller) sharedCaps() map[string]int {
	out := make(map[string]int, len(c.caps))
	for k, v := range c.caps {
		out[k] = max(v/c.replicas, 1)
	}
	return out
}

// Replicas is the number of live replicas last seen in Redis (at least 1).
func (c *Controller) Replicas() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replicas
}

// retryAfter estimates the wait on g with ahead waiters in front. c.mu must be held.
func (c *Controller) retryAfter(g *gateState, ahead int) time.Duration {
	hold := g.holdMean
	if hold == 0 {
		hold = float64(c.defaultHold)
	}
	return time.Duration(float64(ahead+1) * hold / float64(max(g.cap, 1)))
}

// EstimateWait is the wait req would expect if queued now, from the counts
// last seen (no Redis call): 0 when every capped gate on the path looked
// free with nobody queued, else the largest, over the other gates, of
// (queued + 1) × mean hold time ÷ cap. While Redis is away it asks the
// fallback (FailOpen) or answers 0 (FailClosed).
func (c *Controller) EstimateWait(req admission.Request) time.Duration {
	if c.down.Load() {
		if c.mode == FailClosed {
			return 0
		}
		return c.fallback.EstimateWait(req)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var est time.Duration
	for _, r := range req.Gates {
		g := c.gates[r.Key]
		if g == nil || g.cap == 0 || (g.count < g.cap && g.queued == 0) {
			continue
		}
		est = max(est, c.retryAfter(g, g.queued))
	}
	return est
}

// Stats returns a snapshot of every gate this replica knows, sorted by key,
// without calling Redis. InFlight and Queued are cluster-wide as last seen
// (heartbeat every TTL/3, every attempt), and never below this replica's
// own; Waiting, QueuedByClient (this replica's waiters parked on the gate,
// by client key) and the counters are this replica's. Requests admitted by
// the fallback while Redis was away are added in.
func (c *Controller) Stats() []admission.GateStats {
	c.mu.Lock()
	byKey := make(map[string]*admission.GateStats, len(c.gates))
	for _, g := range c.gates {
		byKey[g.key] = &admission.GateStats{
			Key: g.key, Level: g.level, Cap: c.caps[g.key],
			InFlight: max(g.count, g.held), Queued: max(g.queued, len(g.parked)), Waiting: g.waiting,
			Admitted: g.admitted, Timeouts: g.timeouts, QueueFull: g.queueFull, Cancels: g.cancels,
			WaitTotal: g.waitTotal, Waits: g.waits, MeanHold: time.Duration(g.holdMean),
		}
		if len(g.parked) > 0 {
			by := make(map[string]int, 4)
			byP := make(map[admission.Priority]int, 3)
			for _, w := range g.parked {
				by[w.key]++
				byP[w.priority]++
			}
			byKey[g.key].QueuedByClient, byKey[g.key].QueuedByPriority = by, byP
		}
	}
	caps := c.caps
	c.mu.Unlock()
	for _, f := range c.fallback.Stats() {
		s := byKey[f.Key]
		if s == nil {
			s = &admission.GateStats{Key: f.Key, Level: f.Level, Cap: caps[f.Key], MeanHold: f.MeanHold}
			byKey[f.Key] = s
		}
		s.InFlight += f.InFlight
		s.Queued += f.Queued
		for p, n := range f.QueuedByPriority {
			if s.QueuedByPriority == nil {
				s.QueuedByPriority = make(map[admission.Priority]int, len(f.QueuedByPriority))
			}
			s.QueuedByPriority[p] += n
		}
		for id, n := range f.QueuedByClient {
			if s.QueuedByClient == nil {
				s.QueuedByClient = make(map[string]int, len(f.QueuedByClient))
			}
			s.QueuedByClient[id] += n
		}
		s.Waiting += f.Waiting
		s.Admitted += f.Admitted
		s.Timeouts += f.Timeouts
		s.QueueFull += f.QueueFull
		s.Cancels += f.Cancels
		s.WaitTotal += f.WaitTotal
		s.Waits.Add(&f.Waits)
	}
	out := make([]admission.GateStats, 0, len(byKey))
	for _, s := range byKey {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b admission.GateStats) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// SetPriorityAging changes how long a waiter waits before it moves up one
// priority class (≤ 0: admission.DefaultPriorityAging), here and in the
// fallback. A waiter queued in Redis keeps the times it was given when it
// parked; the new period applies to those that park from now on.
func (c *Controller) SetPriorityAging(d time.Duration) {
	c.fallback.SetPriorityAging(d)
	c.mu.Lock()
	c.agingArg = agingMs(d)
	c.mu.Unlock()
}

// agingMs is the aging period d in ms for the scripts, boxed.
func agingMs(d time.Duration) any {
	if d <= 0 {
		d = admission.DefaultPriorityAging
	}
	return max(d.Milliseconds(), 1)
}

// Totals returns the replica-wide outcome counters, fallback included.
func (c *Controller) Totals() admission.Totals {
	f := c.fallback.Totals()
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.totals
	t.Admitted += f.Admitted
	t.Timeouts += f.Timeouts
	t.QueueFull += f.QueueFull
	t.Cancels += f.Cancels
	return t
}

// LostLeases counts slots whose lease expired while this replica still held
// them (it could not renew for a whole TTL): caps may have been exceeded.
func (c *Controller) LostLeases() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lostLeases
}

// ledgerCaps is caps without the gates that can never bind: a gate whose
// cap is at or above the cap of a gate enclosing it (enclosing), which every
// request through it also passes. Such a gate holds at most what the
// enclosing one holds, at most that one's cap, so it takes no lease and
// costs no Redis command; its cap is still reported (Stats). It becomes a
// ledger gate again (its running permits entered, as for any gate that
// becomes capped) when its cap drops below the enclosing gate's or that
// cap is removed. caps is returned as it is when nothing is dominated.
func ledgerCaps(caps map[string]int) map[string]int {
	out, cloned := caps, false
	for key, v := range caps {
		for _, e := range enclosing(key) {
			if ec := caps[e]; ec > 0 && ec <= v {
				if !cloned {
					out, cloned = maps.Clone(caps), true
				}
				delete(out, key)
				break
			}
		}
	}
	return out
}

// enclosing is the gates every path through key's gate passes too, as the
// gateway builds paths (global, provider:<p>, connection:<id>,
// model:<id>:<M>): a model's gate is inside its connection's, and every
// gate but a client key's inside the global one. A connection's provider
// is not in its key, so that enclosure is not used.
func enclosing(key string) []string {
	switch {
	case strings.HasPrefix(key, "model:"):
		id, _, ok := strings.Cut(key[len("model:"):], ":")
		if !ok || id == "" {
			return globalOnly
		}
		return []string{"connection:" + id, "global"}
	case strings.HasPrefix(key, "connection:"), strings.HasPrefix(key, "provider:"):
		return globalOnly
	}
	return nil
}

var globalOnly = []string{"global"}
