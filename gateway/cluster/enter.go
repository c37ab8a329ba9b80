package cluster

import (
	"fmt"
	"log/slog"
)

// entry is a held lease and the gates of its path (bits) whose leases are
// to be entered in Redis: gates that became capped while it ran.
type entry struct {
	l     *lease
	gates uint8
}

// unleasedOn returns the held leases that took no lease on any of gates
// (they were uncapped when admitted) and marks those gates leased. c.mu
// must be held.
func (c *Controller) unleasedOn(gates []*gateState) []entry {
	if len(gates) == 0 {
		return nil
	}
	var out []entry
	for l := range c.leases {
		var bits uint8
		for i, g := range l.path {
			if l.unleased&(1<<i) != 0 && containsGate(gates, g) {
				bits |= 1 << i
			}
		}
		if bits != 0 {
			l.unleased &^= bits
			out = append(out, entry{l, bits})
		}
	}
	return out
}

func containsGate(gates []*gateState, g *gateState) bool {
	for _, x := range gates {
		if x == g {
			return true
		}
	}
	return false
}

// enterLeases adds the leases of entries to their gates' holders, with the
// rejoin script (which adds leases whatever the cap: the permits run
// already). A lease released meanwhile is not entered. If Redis does not
// answer, the leases stay out of the ledger (marked unleased again) and the
// controller switches to its fail mode.
func (c *Controller) enterLeases(entries []entry) {
	c.mu.Lock()
	args := []any{c.ttl.Milliseconds(), 0, 0}
	m := 0
	for _, e := range entries {
		if e.l.released {
			continue
		}
		for i, g := range e.l.path {
			if e.gates&(1<<i) != 0 {
				args = append(args, e.l.member, g.key)
				m++
			}
		}
	}
	c.mu.Unlock()
	if m == 0 {
		return
	}
	args[2] = m
	ctx, cancel := c.op()
	defer cancel()
	err := rejoinScript.Run(ctx, c.rdb, c.keys.queuedKeys, args...).Err()
	if err == nil {
		return
	}
	c.mu.Lock()
	for _, e := range entries {
		e.l.unleased |= e.gates
	}
	c.mu.Unlock()
	c.log.Warn("cluster: could not count the permits running through newly capped gates",
		slog.Int("leases", m), slog.String("error", err.Error()))
	if unreachable(err) {
		c.markDown(fmt.Errorf("cluster: enter leases: %w", err))
	}
}
