package cluster

import (
	"slices"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// Kept leases. A permit given back with ReleaseSoon through gates with room to
// spare keeps its lease in Redis for a moment instead of removing it: the
// next request on the same path takes it over without a round trip, and a
// lease nobody takes within keepIdle is given back as a lazy release would be.
// Redis counts a kept lease as a holder, so a gate's cap holds as before (its
// holders are the permits running plus the leases kept, never fewer than the
// permits); what changes is that a slot may stay taken up to keepIdle after
// its permit ended, and only where this replica saw at most half the cap
// taken, kept leases included, and nobody waiting.
//
// A kept lease is taken over only while every capped gate of its path was
// counted by Redis within keepFresh (an admission, a refusal or a heartbeat)
// and nobody was waiting there then: a replica whose requests all run on kept
// leases sends nothing to Redis, so without that bound it would not see the
// gate fill up elsewhere. After keepFresh the next request is admitted through
// Redis again and the releases meanwhile go to Redis as before; what Redis
// answers (waiters, a fuller gate) stops the keeping. So a waiter on another
// replica waits at most keepFresh (20 ms) plus keepIdle (5 ms) longer for a slot this replica
// keeps, and only on a gate this replica last saw at most half full.

const (
	// defaultKeepIdle is how long a kept lease waits for a request to take it
	// over before it is given back.
	defaultKeepIdle = 5 * time.Millisecond
	// defaultKeepFresh is how old Redis's last count of a gate may be for a
	// lease through it to be kept or taken over.
	defaultKeepFresh = 20 * time.Millisecond
)

// States of a lease (lease.idle).
const (
	inUse = iota // a permit's lease
	kept         // kept for the next request on its path (Controller.kept)
	swept        // taken out of Controller.kept by the sweep, to be given back
)

// pathKey names a path by its gates, for Controller.kept.
type pathKey [maxPath]*gateState

func keyOf(path []*gateState) (k pathKey) {
	copy(k[:], path)
	return k
}

// now is the time since the controller started, on the monotonic clock.
func (c *Controller) now() time.Duration { return time.Since(c.epoch) }

// keepable reports whether l, just given back with ReleaseSoon through gates
// that are all roomy (its release may ride lazily), may keep its lease for
// the next request on its path: keeping is on, the controller runs through
// Redis, l's leases are all there (none lost, and it holds one on exactly
// the capped gates), and Redis counted every capped gate within keepFresh.
// c.mu must be held.
func (c *Controller) keepable(l *lease, now time.Duration) bool {
	if c.keepIdle <= 0 || c.closed || c.draining || c.down.Load() || l.lost != 0 {
		return false
	}
	for i, g := range l.path {
		if leased := l.unleased&(1<<i) == 0; leased != (g.cap > 0) || leased && now-g.seen > c.keepFresh {
			return false
		}
	}
	return true
}

// calm reports whether Redis counted g within fresh and nobody waits on it
// as far as this replica knows. With Controller.mu held.
func (g *gateState) calm(now, fresh time.Duration) bool {
	return g.quiet() && now-g.seen <= fresh
}

// keep files l's lease, still in Redis, for the next request on its path, as
// a new lease (l itself is released: its holder may call Release again). c.mu
// must be held.
func (c *Controller) keep(l *lease, now time.Duration) {
	k := &lease{c: c, member: l.member, path: l.path, unleased: l.unleased, idle: kept, idleAt: now}
	c.leases[k] = struct{}{}
	key := keyOf(l.path)
	c.kept[key] = append(c.kept[key], k)
	for _, g := range l.path {
		g.idle++
	}
	c.nKept.Add(1)
	if !c.keepArmed {
		c.keepArmed = true
		c.keepTimer.Reset(c.keepIdle)
	}
}

// unkeep takes the kept lease k out of Controller.kept. c.mu must be held.
func (c *Controller) unkeep(k *lease) {
	key := keyOf(k.path)
	pool := c.kept[key]
	if i := slices.Index(pool, k); i >= 0 {
		pool = slices.Delete(pool, i, i+1)
	}
	if len(pool) == 0 {
		delete(c.kept, key)
	} else {
		c.kept[key] = pool
	}
	for _, g := range k.path {
		g.idle--
	}
	c.nKept.Add(-1)
	k.idle = swept
}

// takeOver admits req on a lease kept on its path, without a Redis call,
// when every capped gate of the path is calm (counted within keepFresh,
// nobody waiting). It returns nil otherwise, and the caller admits req
// through Redis.
func (c *Controller) takeOver(req admission.Request) *lease {
	if len(req.Gates) > maxPath || len(req.Gates) == 0 {
		return nil
	}
	if c.nKept.Load() == 0 {
		return nil // the usual case: nothing to look up, no lock
	}
	c.mu.Lock()
	if c.closed || c.draining {
		c.mu.Unlock()
		return nil
	}
	var key pathKey
	for i, r := range req.Gates {
		g := c.gates[r.Key]
		if g == nil {
			c.mu.Unlock()
			return nil
		}
		key[i] = g
	}
	pool := c.kept[key]
	if len(pool) == 0 {
		c.mu.Unlock()
		return nil
	}
	now := c.now()
	k := pool[len(pool)-1]
	for i, g := range k.path {
		leased := k.unleased&(1<<i) == 0
		if leased != (g.cap > 0) || k.lost != 0 {
			// Its gate's cap changed or a lease expired: it goes back (the
			// sweep gives it back); this request is admitted as usual.
			c.mu.Unlock()
			return nil
		}
		if leased && (!g.calm(now, c.keepFresh) || g.count >= g.cap) {
			c.mu.Unlock()
			return nil
		}
	}
	c.unkeep(k)
	k.idle = inUse
	k.start = time.Now()
	k.found = notCounted
	for i, g := range k.path {
		if k.unleased&(1<<i) == 0 {
			k.found[i] = int32(g.count) // the others running, as last seen
		}
	}
	c.admitted(k.path, notCounted, 0) // Redis counted nothing now
	c.takenOver++
	c.mu.Unlock()
	return k
}

// sweepKept gives back the kept leases nobody took over within keepIdle
// (ReleaseSoon, lazily where the gates have room), and re-arms itself for
// the rest. It runs on the keep timer.
func (c *Controller) sweepKept() {
	c.mu.Lock()
	c.keepArmed = false
	if c.closed {
		c.mu.Unlock()
		return // Close gives back every lease, kept ones included
	}
	now := c.now()
	var old []*lease
	next := time.Duration(-1)
	for _, pool := range c.kept {
		for _, k := range pool {
			if now-k.idleAt >= c.keepIdle {
				old = append(old, k)
			} else if d := k.idleAt + c.keepIdle - now; next < 0 || d < next {
				next = d
			}
		}
	}
	for _, k := range old {
		c.unkeep(k)
	}
	if next >= 0 {
		c.keepArmed = true
		c.keepTimer.Reset(next)
	}
	c.soon.Add(1) // Close waits for the releases below to be queued and sent
	c.mu.Unlock()
	defer c.soon.Done()
	for _, k := range old {
		k.ReleaseSoon()
	}
}
