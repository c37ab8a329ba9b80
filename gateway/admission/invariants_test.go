package admission

import (
	"fmt"
	"slices"
)

// checkInvariants verifies the controller's internal invariants; c.mu must
// be held. See docs/ADMISSION.md for why each one matters.
func checkInvariants(c *Controller) error {
	parked, classes := 0, 0
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
		q := &g.queue
		if q.len() == 0 && (q.vt != 0 || len(q.fin) != 0 || len(q.flows) != 0) {
			return fmt.Errorf("gate %s: empty queue keeps vt %d, %d turns, %d flows", key, q.vt, len(q.fin), len(q.flows))
		}
		if len(q.flows) != q.len() {
			return fmt.Errorf("gate %s: %d flows in the heap, %d in the map", key, q.len(), len(q.flows))
		}
		for i, f := range q.items {
			if f.idx != i || q.flows[f.client] != f || len(f.classes) == 0 {
				return fmt.Errorf("gate %s: flow %d (client %q) misfiled", key, i, f.client)
			}
			// Fair share: no turn starts before the gate's virtual time (an
			// idle client earns no credit), and a turn has a length.
			if f.tag < q.vt || f.fin <= f.tag || f.inc == 0 {
				return fmt.Errorf("gate %s: flow %q tag %d fin %d inc %d, vt %d", key, f.client, f.tag, f.fin, f.inc, q.vt)
			}
			if i > 0 && flowBefore(f, q.items[(i-1)/2]) {
				return fmt.Errorf("gate %s: heap order broken at flow %d", key, i)
			}
			for j, k := range f.classes {
				if k.idx != j || k.on != g || k.fl != f || k.client != f.client || k.size == 0 || c.classes[classKey{k.path, k.client}] != k {
					return fmt.Errorf("gate %s: class %d of flow %q misfiled (idx %d, size %d)", key, j, f.client, k.idx, k.size)
				}
				if j > 0 && f.classes[(j-1)/2].head.seq > k.head.seq {
					return fmt.Errorf("gate %s: flow %q: class order broken at %d", key, f.client, j)
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
				classes++
			}
		}
		if queued != g.queue.waiters {
			return fmt.Errorf("gate %s: queue counts %d waiters, holds %d", key, g.queue.waiters, queued)
		}
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
