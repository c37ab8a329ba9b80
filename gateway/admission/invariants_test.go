package admission

import (
	"fmt"
	"slices"
)

// checkInvariants verifies the controller's internal invariants; c.mu must
// be held. See docs/ADMISSION.md for why each one matters.
func checkInvariants(c *Controller) error {
	parked := 0
	waitingOn := make(map[*gate]int)
	for key, g := range c.gates {
		if g.key != key {
			return fmt.Errorf("gate %q filed under %q", g.key, key)
		}
		inFlight := c.ledger.InFlight(g.id)
		if inFlight != g.held || inFlight < 0 {
			return fmt.Errorf("gate %s: ledger %d, held %d", key, inFlight, g.held)
		}
		if g.queue.len() > 0 && (g.cap == 0 || inFlight < g.cap) {
			return fmt.Errorf("gate %s: %d waiters parked on a gate with room (%d/%d)", key, g.queue.len(), inFlight, g.cap)
		}
		for i, w := range g.queue.items {
			if w.idx != i || w.on != g || w.state != stateWaiting {
				return fmt.Errorf("gate %s: waiter %d misfiled (idx %d, state %d)", key, w.seq, w.idx, w.state)
			}
			if i > 0 && g.queue.items[(i-1)/2].seq > w.seq {
				return fmt.Errorf("gate %s: heap order broken at %d", key, i)
			}
			if !slices.Contains(w.path[:w.n], g) {
				return fmt.Errorf("gate %s: waiter %d parked off its path", key, w.seq)
			}
			// Parked on the first full gate of its path (in path order, every
			// gate before it had room when it parked or moved), so at least
			// this gate must be full: checked above.
			for _, pg := range w.path[:w.n] {
				waitingOn[pg]++
			}
			parked++
		}
	}
	for _, g := range c.gates {
		if g.waiting != waitingOn[g] {
			return fmt.Errorf("gate %s: waiting %d, want %d", g.key, g.waiting, waitingOn[g])
		}
	}
	for g := range waitingOn {
		if c.gates[g.key] != g {
			return fmt.Errorf("waiter needs gate %s that the controller dropped", g.key)
		}
	}
	if parked != c.waiters {
		return fmt.Errorf("%d waiters parked, controller counts %d", parked, c.waiters)
	}
	return nil
}
