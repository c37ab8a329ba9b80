package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// acquireDegraded admits while Redis is away: through the fallback with
// what is left of the wait (FailOpen), or not at all (FailClosed).
func (c *Controller) acquireDegraded(ctx context.Context, req admission.Request, start time.Time) (admission.Grant, error) {
	if c.mode == FailClosed {
		return nil, c.unavailable()
	}
	before := time.Since(start)
	local := req
	if local.MaxWait > 0 {
		local.MaxWait = max(local.MaxWait-before, time.Nanosecond)
	}
	p, err := c.fallback.Acquire(ctx, local)
	if err != nil {
		var ae *admission.Error
		if errors.As(err, &ae) {
			ae.Waited += before
		}
		return nil, err
	}
	if g, ok := c.failOpen(req, p, before); ok {
		return g, nil
	}
	// Redis came back while the fallback admitted it: ask Redis instead, so
	// nothing runs outside the ledger.
	p.Release()
	return c.acquire(ctx, req, start)
}

func (c *Controller) tryDegraded(req admission.Request) (admission.Grant, bool) {
	if c.mode == FailClosed {
		return nil, false
	}
	p, ok := c.fallback.TryAcquire(req)
	if !ok {
		return nil, false
	}
	if g, ok := c.failOpen(req, p, 0); ok {
		return g, true
	}
	p.Release()
	return c.TryAcquire(req)
}

// failOpen turns a permit the fallback admitted into a grant. While the
// fail mode is in force it is a lease waiting in c.pending to be entered in
// the ledger when Redis returns (rejoin). Once Redis is back it answers false
// (nothing may run outside the ledger then) and the caller gives the permit
// back and asks Redis; the admission is then not counted twice. Deciding
// under c.mu, which rejoin holds when it switches back, leaves no gap.
func (c *Controller) failOpen(req admission.Request, p *admission.Permit, before time.Duration) (admission.Grant, bool) {
	if len(req.Gates) == 0 {
		return fallbackPermit{Permit: p, before: before}, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w, err := c.beginLocked(req)
	if err != nil {
		// Closed (or a path the fallback took and Redis would not): it can
		// only run locally.
		return fallbackPermit{Permit: p, before: before}, true
	}
	if !c.down.Load() {
		// The fallback counted the admission; the attempt through Redis
		// counts its own outcome.
		c.totals.Admitted--
		for _, g := range w.path {
			g.admitted--
		}
		return nil, false
	}
	l := &lease{c: c, member: w.member, path: w.path, start: time.Now(), waited: before + p.Waited(), fb: p, found: notCounted}
	c.pending[l] = struct{}{}
	for _, g := range l.path {
		g.pending++
	}
	return l, true
}

func (c *Controller) unavailable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &UnavailableError{Cause: c.downErr}
}

// unreachable reports whether err means Redis cannot serve us: it cannot be
// reached (network, timeout), or it answers with an error — LOADING,
// MASTERDOWN, READONLY, but also OOM under maxmemory with noeviction, NOPERM
// or a script error. Every failure of a Redis call counts: the replica
// follows its fail mode rather than hand the error to the gateway, which
// could only refuse the request (DESIGN, "Gateway rules that hold under
// attack"). Whether Redis serves again is the heartbeat's to find out.
func unreachable(err error) bool { return err != nil }
