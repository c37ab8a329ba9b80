package cluster

import (
	"fmt"
	"time"
)

// gateCap is what the admit transaction needs of a capped gate: its holders
// key, its key (boxed, for HMGET of 'queued') and its cap.
type gateCap struct {
	hKey string
	key  any
	cap  int64
}

// admitTx is the uncontended admission without a script, for a client that
// pipelines to one server: one MULTI/EXEC transaction that reads who waits
// on the gates (HMGET of 'queued') and adds member's lease to each gate's
// holders with a count of them (a ZADD and a ZCARD per gate). EXEC runs it
// atomically, so the counts include every lease added before and none
// after. Admitted when nobody waits on any gate and no gate counts more than
// its cap, itself included; then it returns, per gate, the holders found
// before it (as admit.lua does). Otherwise the leases just added are taken
// back at once — a release, which wakes the first in line where somebody
// waits, since the lease may have made a waiter's re-check find the gate
// full — and it answers false (the caller runs the acquire script, which
// queues fairly). A lease added and taken back is never a permit: no gate
// admits beyond its cap, though a concurrent newcomer may count it for the
// moment and take the acquire script's way too.
//
// A lease's expiry is on Redis's clock, as the scripts write it: this
// replica's clock plus the offset to Redis's learned at each heartbeat.
//
// found is, per gate, the holders other than member (also when refused);
// waiting has bit i set when somebody waits on gates[i].
func (c *Controller) admitTx(member string, gates []gateCap) (found []int64, waiting uint8, ok bool, err error) {
	exp := time.Now().UnixMilli() + c.clockOff.Load() + c.ttl.Milliseconds()
	var buf [1 + 2*maxPath][]any
	tx := buf[:0]
	hm := make([]any, 0, 2+len(gates))
	hm = append(hm, "hmget", c.keys.queued)
	for _, g := range gates {
		hm = append(hm, g.key)
	}
	tx = append(tx, hm)
	for _, g := range gates {
		tx = append(tx, []any{"zadd", g.hKey, exp, member}, []any{"zcard", g.hKey})
	}
	vals, err := c.co.runTx(tx).Slice()
	if err != nil {
		return nil, 0, false, fmt.Errorf("cluster: admit: %w", err)
	}
	if len(vals) != 1+2*len(gates) {
		return nil, 0, false, fmt.Errorf("cluster: admit: EXEC answered %d values, want %d", len(vals), 1+2*len(gates))
	}
	queued, _ := vals[0].([]any)
	found = make([]int64, len(gates))
	ok = true
	for i, g := range gates {
		if i < len(queued) && queued[i] != nil {
			ok = false
			waiting |= 1 << i
		}
		for _, v := range vals[1+2*i : 3+2*i] {
			if e, isErr := v.(error); isErr {
				return nil, 0, false, fmt.Errorf("cluster: admit: %w", e)
			}
		}
		held, _ := vals[2+2*i].(int64)
		if held > g.cap {
			ok = false
		}
		found[i] = held - 1
	}
	if ok {
		return found, 0, true, nil
	}
	// Taken back: a release that wakes the first in line only where the
	// gate has room without this lease (elsewhere the lease changed nothing
	// a waiter's re-check could see).
	keys := make([]any, len(gates))
	caps := make([]int64, len(gates))
	for i, g := range gates {
		keys[i], caps[i] = g.key, g.cap
	}
	if _, err := c.releaseTxCapped(member, keys, caps); err != nil {
		return nil, 0, false, fmt.Errorf("cluster: admit: take back: %w", err)
	}
	return found, waiting, false, nil
}

// admit runs the uncontended admission (admit.lua) for w, a newcomer: it
// admits only when nobody waits on the path and every capped gate has
// room, and changes nothing otherwise (the caller then runs attempt). When
// this replica last saw a capped gate of the path full or with waiters it
// answers false at once, so that a newcomer to a busy gate makes one round
// trip (the full attempt), not two.
//
// Only the path's capped gates are sent: an uncapped gate takes no lease
// (w.unleased), so a path with no capped gate costs no Redis call at all.
// A gate that becomes capped later counts the permits still running
// through it from then on: SetCaps (and grant, for an admission that
// raced it) enters their leases.
func (c *Controller) admit(w *waiter) (bool, error) {
	var buf [2 + 2*maxPath]any
	var capped [maxPath]gateCap
	args := append(buf[:0], w.member, c.ttlArg)
	var unleased uint8
	nc := 0
	c.mu.Lock()
	for i, g := range w.path {
		if g.cap == 0 {
			unleased |= 1 << i
			continue
		}
		if g.queued > 0 || len(g.parked) > 0 || g.count >= g.cap {
			c.mu.Unlock()
			return false, nil
		}
		args = append(args, g.keyArg, g.capArg)
		capped[nc] = gateCap{g.hKey, g.keyArg, int64(g.cap)}
		nc++
	}
	c.mu.Unlock()
	var vals []int64
	if nc > 0 && c.txRelease && c.clockKnown.Load() {
		found, waiting, ok, err := c.admitTx(w.member, capped[:nc])
		if err != nil {
			return false, err
		}
		if !ok {
			// What it found keeps this replica's next newcomers from
			// trying the transaction on a gate that is full or has waiters.
			c.mu.Lock()
			j := 0
			for _, g := range w.path {
				if g.cap > 0 && j < len(found) {
					g.count = max(g.count, int(found[j]))
					if waiting&(1<<j) != 0 {
						g.queued = max(g.queued, 1)
					}
					j++
				}
			}
			c.mu.Unlock()
			return false, nil
		}
		vals = found
	} else if nc > 0 {
		var err error
		vals, err = c.co.run(admitScript, c.keys.queuedKeys, args).Int64Slice()
		if err != nil {
			return false, fmt.Errorf("cluster: admit: %w", err)
		}
		if len(vals) == 0 || vals[0] != stAdmitted {
			return false, nil
		}
		vals = vals[1:]
	}
	w.unleased = unleased
	j := 0
	for i := range w.path {
		w.found[i] = -1
		if unleased&(1<<i) == 0 && j < len(vals) {
			w.found[i] = int32(vals[j])
			j++
		}
	}
	c.mu.Lock()
	for _, g := range w.path {
		if g.cap > 0 {
			g.queued = 0 // admit.lua admits only when nobody waits on the path
		}
	}
	c.mu.Unlock()
	return true, nil
}
