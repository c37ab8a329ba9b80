package cluster

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// giveUp takes w out of its queue, locally and in Redis, and returns the
// error for its caller: a timeout (*admission.Error) when cause is nil,
// else cause (ctx.Err() or ErrClosed; errDrained becomes a SHUTTING_DOWN
// *admission.Error), counted as a cancel.
func (c *Controller) giveUp(w *waiter, cause error, start time.Time) error {
	c.mu.Lock()
	g := w.path[w.on]
	keys := []string{c.keys.queued, w.qgate.wKey}
	args := []any{w.member, w.entry, g.key, g.cap}
	c.unpark(w)
	var err error
	if cause != nil {
		g.cancels++
		c.totals.Cancels++
		err = cause
		if cause == errDrained {
			err = &admission.Error{Code: admission.CodeShuttingDown,
				Gate: admission.GateRef{Level: g.level, Key: g.key}, Waited: time.Since(start)}
		}
	} else {
		g.timeouts++
		c.totals.Timeouts++
		err = &admission.Error{
			Code:       admission.CodeTimeout,
			Gate:       admission.GateRef{Level: g.level, Key: g.key},
			Waited:     time.Since(start),
			RetryAfter: c.retryAfter(g, g.queued),
		}
	}
	c.mu.Unlock()
	ctx, cancel := c.op()
	defer cancel()
	if lerr := leaveScript.Run(ctx, c.rdb, keys, args...).Err(); lerr != nil {
		// Removed when Redis is reachable again (rejoin); until then it
		// lapses within two renew periods.
		c.mu.Lock()
		c.orphans = append(c.orphans, orphan{member: w.member, entry: w.entry, gate: g, qgate: w.qgate, at: time.Now()})
		c.mu.Unlock()
		if unreachable(lerr) {
			c.markDown(lerr)
		}
	}
	return err
}

// orphan is the queue entry in Redis of a waiter this replica dropped
// without removing it there (Redis was away): rejoin removes it.
type orphan struct {
	member      string
	entry       string     // its queue entry
	gate, qgate *gateState // the gate it was parked on; its queue gate
	at          time.Time
}

// orphan forgets w locally and records its queue entry for rejoin to
// remove. c.mu must be held.
func (c *Controller) orphan(w *waiter) {
	if w.on < 0 {
		return
	}
	c.orphans = append(c.orphans, orphan{member: w.member, entry: w.entry, gate: w.path[w.on], qgate: w.qgate, at: time.Now()})
	c.unpark(w)
}

// rejectFull builds the queue-full rejection; nothing was queued. A request
// whose ctx has already ended is a cancel instead, as in package admission.
func (c *Controller) rejectFull(ctx context.Context, w *waiter, out outcome) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	qg, g := w.qgate, w.path[out.blocked]
	g.count, g.queued = g.counted(out.count), out.queued
	if err := ctx.Err(); err != nil {
		g.cancels++
		c.totals.Cancels++
		return err
	}
	qg.queueFull++
	c.totals.QueueFull++
	return &admission.Error{
		Code:       admission.CodeQueueFull,
		Gate:       admission.GateRef{Level: qg.level, Key: qg.key},
		RetryAfter: c.retryAfter(g, int(out.arrival)),
	}
}
