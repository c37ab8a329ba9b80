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
			return fmt.Errorf("gate %s: %d waiters parked on a gate with room (%d/%d)", key, g.queue.waiters, inFlight, g.cap)
		}
		queued := 0
		for i, k := range g.queue.items {
			if k.idx != i || k.on != g || k.size == 0 || c.classes[k.path] != k {
				return fmt.Errorf("gate %s: class %d misfiled (idx %d, size %d)", key, i, k.idx, k.size)
			}
			if i > 0 && g.queue.items[(i-1)/2].head.seq > k.head.seq {
				return fmt.Errorf("gate %s: heap order broken at %d", key, i)
			}
			if !slices.Contains(k.path[:k.n], g) {
				return fmt.Errorf("gate %s: class parked off its path", key)
			}
			// Parked on a full gate of its path: checked above.
			size := 0
			var prev *waiter
			for w := k.head; w != nil; prev, w = w, w.next {
				if w.cls != k || w.prev != prev || w.state != stateWaiting || w.path != k.path && !slices.Equal(w.path[:w.n], k.path[:k.n]) || w.n != k.n {
					return fmt.Errorf("gate %s: waiter %d misfiled (state %d)", key, w.seq, w.state)
				}
				if prev != nil && prev.seq >= w.seq {
					return fmt.Errorf("gate %s: class out of arrival order at waiter %d", key, w.seq)
				}
				for _, pg := range w.path[:w.n] {
					waitingOn[pg]++
				}
				size++
			}
			if size != k.size || prev != k.tail {
				return fmt.Errorf("gate %s: class counts %d waiters, holds %d", key, k.size, size)
			}
			queued += size
			parked += size
		}
		if queued != g.queue.waiters {
			return fmt.Errorf("gate %s: queue counts %d waiters, holds %d", key, g.queue.waiters, queued)
		}
	}
	classes := 0
	for _, g := range c.gates {
		classes += g.queue.len()
	}
	if classes != len(c.classes) {
		return fmt.Errorf("%d classes parked, controller knows %d", classes, len(c.classes))
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
