package admission

import "time"

// gateWait estimates the wait at g for a request arriving now: every waiter
// that needs g (wherever it is parked) is ahead of it, so (g.waiting + 1) ×
// mean hold time ÷ cap.
func (c *Controller) gateWait(g *gate) time.Duration {
	hold := g.holdMean
	if hold == 0 {
		hold = float64(c.defaultHold)
	}
	return time.Duration(float64(g.waiting+1) * hold / float64(max(g.cap, 1)))
}

// pathWait is the wait a request on path would expect if it queued now: 0
// when every gate has room, else the largest gateWait over its full gates.
// A rejection's RetryAfter is pathWait of its path once it has left every
// queue. c.mu must be held.
func (c *Controller) pathWait(path []*gate) time.Duration {
	var est time.Duration
	for _, g := range path {
		if !c.hasRoom(g) {
			est = max(est, c.gateWait(g))
		}
	}
	return est
}

// EstimateWait is the wait req would expect if queued now: 0 when it can be
// admitted at once, else, over the full gates of its path, the largest of
// (waiters that need the gate + 1) × mean hold time ÷ cap. It creates no gate.
func (c *Controller) EstimateWait(req Request) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var est time.Duration
	for _, r := range req.Gates {
		if g := c.gates[r.Key]; g != nil && !c.hasRoom(g) {
			est = max(est, c.gateWait(g))
		}
	}
	return est
}
