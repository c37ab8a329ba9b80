package admission

// SetCaps applies the full set of caps from a config snapshot, keyed by gate
// key. A gate absent from caps (or with a cap of 0 or less) becomes uncapped
// and its waiters move on; a raised cap admits waiters at once; a lowered cap
// admits nobody until in-flight is below it, and never cuts a running
// request. Uncapped gates that hold nothing, that no waiter needs and that
// caps does not name are dropped from memory here, counters and all; capped
// gates stay, idle or not, and so do gates named with a cap of 0 or less,
// which is how a snapshot keeps the counters of an uncapped gate it still
// uses (a connection without maxConcurrent) across reloads.
func (c *Controller) SetCaps(caps map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var dirty []*gate
	for key, g := range c.gates {
		next := max(caps[key], 0)
		if next == g.cap {
			continue
		}
		raised := next == 0 || (g.cap != 0 && next > g.cap)
		g.cap = next
		if raised { // drain passes over a gate with nobody parked on it
			dirty = append(dirty, g)
		}
	}
	for key, cp := range caps {
		if cp > 0 && c.gates[key] == nil {
			c.addGate("", key).cap = cp
		}
	}
	c.drain(dirty)
	for key, g := range c.gates {
		if _, named := caps[key]; !named && g.cap == 0 && g.held == 0 && g.waiting == 0 {
			delete(c.gates, key)
			c.ledger.Close(g.id)
			c.gen++ // prepared requests may point at g: resolve them again
		}
	}
}
