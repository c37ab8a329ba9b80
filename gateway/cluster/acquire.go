package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// maxPath is the longest path a request may name, as in package admission.
const maxPath = 8

// Outcomes of the acquire script.
const (
	stQueueFull = -1
	stQueued    = 0
	stAdmitted  = 1
	stBlocked   = 2 // try only: blocked, nothing queued
)

// outcome is what one acquire script call answered.
type outcome struct {
	status  int64
	blocked int   // 0-based index of the blocking gate
	arrival int64 // the waiter's arrival when queued; waiters counted when the queue is full
	count   int   // holders of the blocking gate
	queued  int   // queue length of the blocking gate
}

// Acquire waits until every gate on req's path has room across the cluster,
// takes one slot in each, and returns the admission.Grant that holds them. Like
// admission.Controller.Acquire it returns an *admission.Error (ErrTimeout,
// ErrQueueFull) when it gives up and ctx.Err() when ctx ends first. While
// Redis is away it admits through the per-replica fallback (FailOpen) or
// returns an *UnavailableError (FailClosed). After Close it returns ErrClosed.
//
// The uncontended case costs one Redis round trip.
func (c *Controller) Acquire(ctx context.Context, req admission.Request) (admission.Grant, error) {
	return c.acquire(ctx, req, time.Now())
}

func (c *Controller) acquire(ctx context.Context, req admission.Request, start time.Time) (admission.Grant, error) {
	if c.down.Load() {
		return c.acquireDegraded(ctx, req, start)
	}
	if l := c.takeOver(req); l != nil {
		return l, nil
	}
	w, err := c.begin(req)
	if err != nil {
		return nil, err
	}
	if len(w.path) == 0 {
		return c.grant(w, 0), nil
	}
	admitted, err := c.admit(w)
	if err == nil && admitted {
		return c.grant(w, 0), nil
	}
	var out outcome
	if err == nil {
		out, err = c.attempt(w, req, false)
	}
	if err != nil {
		if unreachable(err) {
			c.markDown(err)
			return c.acquireDegraded(ctx, req, start)
		}
		return nil, err
	}
	switch out.status {
	case stAdmitted:
		return c.grant(w, 0), nil
	case stQueueFull:
		return nil, c.rejectFull(ctx, w, out)
	}
	if c.queuedHook != nil {
		c.queuedHook()
	}
	c.mu.Lock()
	c.park(w, out)
	w.kickIfMissed()
	c.mu.Unlock()
	return c.wait(ctx, req, w, start)
}

// TryAcquire admits req only if it can be admitted right now: every gate on
// its path has room beyond the waiters anywhere in the cluster whose fair
// turn there comes before req's. It never waits or queues, and counts
// nothing when it fails. While
// Redis is away it asks the fallback (FailOpen) or fails (FailClosed).
func (c *Controller) TryAcquire(req admission.Request) (admission.Grant, bool) {
	if c.down.Load() {
		return c.tryDegraded(req)
	}
	if l := c.takeOver(req); l != nil {
		return l, true
	}
	w, err := c.begin(req)
	if err != nil {
		return nil, false
	}
	if len(w.path) == 0 {
		return c.grant(w, 0), true
	}
	admitted, err := c.admit(w)
	if err == nil && admitted {
		return c.grant(w, 0), true
	}
	var out outcome
	if err == nil {
		out, err = c.attempt(w, req, true)
	}
	if err != nil {
		if unreachable(err) {
			c.markDown(err)
			return c.tryDegraded(req)
		}
		return nil, false
	}
	if out.status != stAdmitted {
		c.mu.Lock()
		g := w.path[out.blocked]
		g.count, g.queued = g.counted(out.count), out.queued
		c.mu.Unlock()
		return nil, false
	}
	return c.grant(w, 0), true
}

// begin resolves req's path (creating unknown gates, uncapped) into a new
// waiter that owns a fresh member id.
func (c *Controller) begin(req admission.Request) (*waiter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.beginLocked(req)
}

// beginLocked is begin with c.mu held.
func (c *Controller) beginLocked(req admission.Request) (*waiter, error) {
	if len(req.Gates) > maxPath {
		return nil, fmt.Errorf("cluster: path has %d gates, at most %d", len(req.Gates), maxPath)
	}
	if c.closed {
		return nil, ErrClosed
	}
	if c.draining {
		return nil, &admission.Error{Code: admission.CodeShuttingDown}
	}
	path := make([]*gateState, len(req.Gates))
	for i, r := range req.Gates {
		if r.Key == "" {
			return nil, errors.New("cluster: gate with an empty key")
		}
		g := c.gates[r.Key]
		if g == nil {
			g = c.newGate(r.Level, r.Key)
			c.gates[r.Key] = g
		}
		for _, prev := range path[:i] {
			if prev == g {
				return nil, fmt.Errorf("cluster: gate %s named twice in one path", g.key)
			}
		}
		path[i] = g
	}
	c.seq++
	w := &waiter{
		member:   c.replica + ":" + strconv.FormatUint(c.seq, 10),
		client:   c.clientField(req.Client),
		key:      req.Client,
		priority: req.Priority,
		path:     path,
		on:       -1,
		found:    notCounted,
		kickCh:   make(chan struct{}, 1),
	}
	if len(path) > 0 {
		w.qgate = queueGate(req, path)
	}
	return w, nil
}

// clientField is the fair-state field of client key id, "c:<id>", boxed
// once per key (so a script's arguments do not allocate for it). c.mu must
// be held.
func (c *Controller) clientField(id string) any {
	if id == "" {
		return "c:"
	}
	f, ok := c.clientFields[id]
	if !ok {
		if len(c.clientFields) >= maxClientFields {
			clear(c.clientFields) // keys come and go: start over rather than grow
		}
		f = "c:" + id
		c.clientFields[id] = f
	}
	return f
}

// maxClientFields bounds clientField's cache.
const maxClientFields = 4096

func queueGate(req admission.Request, path []*gateState) *gateState {
	if req.QueueKey != "" {
		for _, g := range path {
			if g.key == req.QueueKey {
				return g
			}
		}
	}
	for _, g := range path {
		if g.level == "connection" {
			return g
		}
	}
	return path[len(path)-1]
}

// attempt runs the acquire script once for w.
func (c *Controller) attempt(w *waiter, req admission.Request, try bool) (outcome, error) {
	n := len(w.path)
	keys := []string{c.keys.queued, w.qgate.wKey}
	args := make([]any, 0, 11+2*n)
	c.mu.Lock()
	tryArg := "0"
	if try {
		tryArg = "1"
	}
	args = append(args, w.member, w.on+1, tryArg, w.client, costArg(req.Weight), c.ttlArg,
		max(req.MaxQueueDepth, 0), w.arrival, levelArg(req.Priority), c.agingArg, n)
	for _, g := range w.path {
		args = append(args, g.keyArg, g.capArg)
	}
	w.markWakes()
	c.mu.Unlock()

	ctx, cancel := c.op()
	defer cancel()
	vals, err := acquireScript.Run(ctx, c.rdb, keys, args...).Int64Slice()
	if err != nil {
		return outcome{}, fmt.Errorf("cluster: acquire: %w", err)
	}
	if len(vals) < 5 {
		return outcome{}, fmt.Errorf("cluster: acquire: script answered %d values, want at least 5", len(vals))
	}
	out := outcome{status: vals[0], blocked: int(vals[1]) - 1, arrival: vals[2], count: int(vals[3]), queued: int(vals[4])}
	if out.status == stAdmitted {
		w.setFound(vals[5:])
	}
	if out.status != stAdmitted && (out.blocked < 0 || out.blocked >= n) {
		return outcome{}, fmt.Errorf("cluster: acquire: script named gate %d of %d", out.blocked+1, n)
	}
	return out, nil
}

// levelArgs are the scripts' class levels, boxed once: 0 interactive, 1
// standard, 2 batch (fair.lua).
var levelArgs = [3]any{int64(0), int64(1), int64(2)}

// levelArg is p's level for the scripts, boxed; values out of range count
// as the nearest class, as in package admission.
func levelArg(p admission.Priority) any {
	return levelArgs[min(max(int(p), -1), 1)+1]
}

// park records w, just queued in Redis, as parked on its blocking gate.
// c.mu must be held.
func (c *Controller) park(w *waiter, out outcome) {
	w.setArrival(out.arrival)
	w.on = out.blocked
	g := w.path[out.blocked]
	g.count, g.queued = g.counted(out.count), out.queued
	g.park(w)
	for _, pg := range w.path {
		pg.waiting++
	}
	c.waiters[w] = struct{}{}
}

// unpark forgets w locally. c.mu must be held.
func (c *Controller) unpark(w *waiter) {
	if w.on < 0 {
		return
	}
	w.path[w.on].unpark(w)
	w.on = -1
	for _, g := range w.path {
		g.waiting--
	}
	delete(c.waiters, w)
}

// wait re-checks w each time it is woken until it is admitted, times out,
// its context ends or the controller closes.
func (c *Controller) wait(ctx context.Context, req admission.Request, w *waiter, start time.Time) (admission.Grant, error) {
	var timeout <-chan time.Time
	if req.MaxWait > 0 {
		t := time.NewTimer(req.MaxWait - time.Since(start))
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case <-w.kickCh:
		case <-ctx.Done():
			return nil, c.giveUp(w, ctx.Err(), start)
		case <-timeout:
			return nil, c.giveUp(w, nil, start)
		case <-c.closing:
			return nil, c.giveUp(w, ErrClosed, start)
		case <-c.drained:
			return nil, c.giveUp(w, errDrained, start)
		}
		if c.down.Load() {
			c.mu.Lock()
			c.orphan(w)
			c.mu.Unlock()
			return c.acquireDegraded(ctx, req, start)
		}
		out, err := c.attempt(w, req, false)
		if err != nil {
			c.mu.Lock()
			c.orphan(w)
			c.mu.Unlock()
			if unreachable(err) {
				c.markDown(err)
				return c.acquireDegraded(ctx, req, start)
			}
			return nil, err
		}
		c.mu.Lock()
		if out.status == stAdmitted {
			// If the gate it leaves has room for the next in line, the
			// script woke that waiter, wherever it waits.
			c.unpark(w)
			c.mu.Unlock()
			return c.grant(w, time.Since(start)), nil
		}
		if out.blocked != w.on {
			// Moved to the gate that blocks it now, keeping its arrival.
			w.path[w.on].unpark(w)
			w.on = out.blocked
			w.setArrival(out.arrival)
			w.path[w.on].park(w)
		}
		g := w.path[w.on]
		g.count, g.queued = g.counted(out.count), out.queued
		w.kickIfMissed()
		c.mu.Unlock()
	}
}

// grant records the admission of w and returns its permit. A gate of the
// path that was admitted without a lease (uncapped then) and is capped now
// gets its lease entered here: SetCaps capped it after admit looked.
func (c *Controller) grant(w *waiter, waited time.Duration) *lease {
	l := &lease{c: c, member: w.member, path: w.path, start: time.Now(), waited: waited, found: w.found, unleased: w.unleased}
	c.mu.Lock()
	if len(w.path) == 0 {
		c.totals.Admitted++
		c.mu.Unlock()
		return l
	}
	c.leases[l] = struct{}{}
	c.admitted(w.path, w.found, waited)
	var enter uint8
	for i, g := range w.path {
		if l.unleased&(1<<i) != 0 && g.cap > 0 {
			enter |= 1 << i
		}
	}
	l.unleased &^= enter
	c.mu.Unlock()
	if enter != 0 {
		c.enterLeases([]entry{{l, enter}})
	}
	return l
}

// admitted counts an admission through path after waited, found being what
// Redis counted on each gate (-1: not counted). c.mu must be held.
func (c *Controller) admitted(path []*gateState, found [maxPath]int32, waited time.Duration) {
	c.totals.Admitted++
	var now time.Duration
	for i, g := range path {
		g.held++
		if f := found[i]; f >= 0 {
			g.count = g.counted(int(f) + 1) // the cluster-wide count, as the script found it
			if now == 0 {
				now = c.now()
			}
			g.seen = now
		} else {
			g.count++
		}
		g.admitted++
		g.waitTotal += waited
		g.waits.Observe(waited)
	}
}
