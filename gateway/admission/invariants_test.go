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
	now := c.clock()
	for key, g := range c.gates {
		if g.key != key {
			return fmt.Errorf("gate %q filed under %q", g.key, key)
		}
		inFlight := c.ledger.InFlight(g.id)
		if inFlight != g.held || inFlight < 0 {
			return fmt.Errorf("gate %s: ledger %d, held %d", key, inFlight, g.held)
		}
		if g.parked > 0 && (g.cap == 0 || inFlight < g.cap) {
			return fmt.Errorf("gate %s: %d waiters parked on a gate with room (%d/%d)", key, g.queue.waiters(), inFlight, g.cap)
		}
		queued, onGate, aging := 0, 0, 0
		for lv := range g.queue.lv {
			q := &g.queue.lv[lv]
			n, cl, err := checkLevel(c, g, lv, q, waitingOn, now)
			if err != nil {
				return err
			}
			queued += n
			onGate += cl
			if lv > 0 {
				aging += cl
			}
		}
		if onGate != g.parked {
			return fmt.Errorf("gate %s: counts %d classes parked, holds %d", key, g.parked, onGate)
		}
		if len(g.queue.aging) != aging {
			return fmt.Errorf("gate %s: %d classes in the aging heap, %d below level 0", key, len(g.queue.aging), aging)
		}
		for i, k := range g.queue.aging {
			if k.ageIdx != i || k.on != g || k.level == 0 {
				return fmt.Errorf("gate %s: aging heap entry %d misfiled (level %d)", key, i, k.level)
			}
			if i > 0 && k.due < g.queue.aging[(i-1)/2].due {
				return fmt.Errorf("gate %s: aging heap order broken at %d", key, i)
			}
		}
		if queued != g.queue.waiters() {
			return fmt.Errorf("gate %s: queue counts %d waiters, holds %d", key, g.queue.waiters(), queued)
		}
		parked += queued
		classes += onGate
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

// checkLevel checks the fair-share queue of level lv on gate g and the
// classes in it, counting their waiters' paths into waitingOn; it returns
// the waiters and the classes it holds.
func checkLevel(c *Controller, g *gate, lv int, q *waitQueue, waitingOn map[*gate]int, now int64) (queued, classes int, err error) {
	key := g.key
	if q.len() == 0 && (q.vt != 0 || len(q.fin) != 0 || len(q.flows) != 0) {
		return 0, 0, fmt.Errorf("gate %s level %d: empty queue keeps vt %d, %d turns, %d flows", key, lv, q.vt, len(q.fin), len(q.flows))
	}
	if len(q.flows) != q.len() {
		return 0, 0, fmt.Errorf("gate %s level %d: %d flows in the heap, %d in the map", key, lv, q.len(), len(q.flows))
	}
	for i, f := range q.items {
		if f.idx != i || q.flows[f.client] != f || len(f.classes) == 0 {
			return 0, 0, fmt.Errorf("gate %s level %d: flow %d (client %q) misfiled", key, lv, i, f.client)
		}
		// Fair share: no turn starts before the level's virtual time (an
		// idle client earns no credit), and a turn has a length.
		if f.tag < q.vt || f.fin <= f.tag || f.inc == 0 {
			return 0, 0, fmt.Errorf("gate %s level %d: flow %q tag %d fin %d inc %d, vt %d", key, lv, f.client, f.tag, f.fin, f.inc, q.vt)
		}
		if i > 0 && flowBefore(f, q.items[(i-1)/2]) {
			return 0, 0, fmt.Errorf("gate %s level %d: heap order broken at flow %d", key, lv, i)
		}
		for j, k := range f.classes {
			if k.idx != j || k.on != g || k.fl != f || int(k.level) != lv || k.client != f.client || k.size == 0 || c.classes[classKey{k.path, uint64(k.base), k.client}] != k {
				return 0, 0, fmt.Errorf("gate %s level %d: class %d of flow %q misfiled (idx %d, size %d, level %d)", key, lv, j, f.client, k.idx, k.size, k.level)
			}
			if j > 0 && f.classes[(j-1)/2].head.seq > k.head.seq {
				return 0, 0, fmt.Errorf("gate %s level %d: flow %q: class order broken at %d", key, lv, f.client, j)
			}
			if !slices.Contains(k.path[:k.n], g) {
				return 0, 0, fmt.Errorf("gate %s: class parked off its path", key)
			}
			// Priority: a class is at a level its head has held (between its
			// own class and the one its wait entitles it to now: moving up
			// waits for the gate's next decision, moving down is at once),
			// and it is in the aging heap, due when its head moves up,
			// exactly when it is below level 0.
			if int(k.level) > int(k.base) || int(k.level) < c.levelAt(k, now) {
				return 0, 0, fmt.Errorf("gate %s: class of priority level %d at level %d, entitled to %d now", key, k.base, k.level, c.levelAt(k, now))
			}
			if (k.level > 0) != (k.ageIdx >= 0) || k.level > 0 && (k.due != c.dueOf(k) || g.queue.aging[k.ageIdx] != k) {
				return 0, 0, fmt.Errorf("gate %s: class at level %d: aging entry %d, due %d, want %d", key, k.level, k.ageIdx, k.due, c.dueOf(k))
			}
			// Parked on a full gate of its path: checked by the caller.
			size := 0
			var prev *waiter
			for w := k.head; w != nil; prev, w = w, w.next {
				if w.cls != k || w.prev != prev || w.state != stateWaiting || w.path != k.path && !slices.Equal(w.path[:w.n], k.path[:k.n]) || w.n != k.n {
					return 0, 0, fmt.Errorf("gate %s: waiter %d misfiled (state %d)", key, w.seq, w.state)
				}
				if prev != nil && (prev.seq >= w.seq || prev.at > w.at) {
					return 0, 0, fmt.Errorf("gate %s: class out of arrival order at waiter %d", key, w.seq)
				}
				for _, pg := range w.path[:w.n] {
					waitingOn[pg]++
				}
				size++
			}
			if size != k.size || prev != k.tail {
				return 0, 0, fmt.Errorf("gate %s: class counts %d waiters, holds %d", key, k.size, size)
			}
			queued += size
			classes++
		}
	}
	if queued != q.waiters {
		return 0, 0, fmt.Errorf("gate %s level %d: counts %d waiters, holds %d", key, lv, q.waiters, queued)
	}
	return queued, classes, nil
}
