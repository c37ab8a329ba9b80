package admission

// Drain ends the wait of every parked waiter with an *Error of
// CodeShuttingDown (matching ErrShuttingDown) naming the gate it was parked
// on, at once, and makes every later Acquire fail the same way and every
// later TryAcquire report false: a process that is shutting down tells its
// queued clients to go elsewhere instead of letting them wait for nothing.
// Permits already held are not touched; their Release works as before.
// Drained waiters count as cancels, not as rejections. Drain is idempotent.
func (c *Controller) Drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return
	}
	c.draining = true
	now := c.now()
	ns := int64(now.Sub(c.epoch))
	for _, g := range c.gates {
		for g.parked > 0 {
			w := c.next(g, ns).head
			c.unpark(w, ns)
			w.state = stateDrained
			w.drained = &Error{Code: CodeShuttingDown, Gate: GateRef{Level: g.level, Key: g.key}, Waited: now.Sub(w.start)}
			g.cancels++
			c.totals.Cancels++
			w.ch <- struct{}{}
		}
	}
}

// shuttingDown is the rejection of a request that arrives after Drain,
// naming the gate whose queue it would have joined. c.mu must be held.
func (c *Controller) shuttingDown(req *Request, path []*gate) *Error {
	e := &Error{Code: CodeShuttingDown}
	if len(path) > 0 {
		g := c.queueGate(req, path)
		e.Gate = GateRef{Level: g.level, Key: g.key}
	}
	return e
}
