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
func (c *Controller) admitTx(member string, gates []gateCap) ([]int64, bool, error) {
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
		return nil, false, fmt.Errorf("cluster: admit: %w", err)
	}
	if len(vals) != 1+2*len(gates) {
		return nil, false, fmt.Errorf("cluster: admit: EXEC answered %d values, want %d", len(vals), 1+2*len(gates))
	}
	waiting, _ := vals[0].([]any)
	found := make([]int64, len(gates))
	ok := true
	for i, g := range gates {
		if i < len(waiting) && waiting[i] != nil {
			ok = false
		}
		for _, v := range vals[1+2*i : 3+2*i] {
			if e, isErr := v.(error); isErr {
				return nil, false, fmt.Errorf("cluster: admit: %w", e)
			}
		}
		held, _ := vals[2+2*i].(int64)
		if held > g.cap {
			ok = false
		}
		found[i] = held - 1
	}
	if ok {
		return found, true, nil
	}
	keys := make([]any, len(gates))
	for i, g := range gates {
		keys[i] = g.key
	}
	if _, err := c.releaseTx(member, keys); err != nil {
		return nil, false, fmt.Errorf("cluster: admit: take back: %w", err)
	}
	return nil, false, nil
}
