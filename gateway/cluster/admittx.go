package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// gateCap is what the admit transaction needs of a capped gate: its holders
// key and its key, boxed once per gate (gateState), and its cap.
type gateCap struct {
	hKey, key, capArg any
	cap               int64
}

// txBuf holds one transaction's commands and their arguments, so that a
// request allocates neither for its keys nor for the slices that carry them:
// the arguments are boxed once per gate (gateState), and the buffers are
// reused. go-redis keeps the argument slices it is given, so a txBuf goes
// back to the pool only once the replies are read.
type txBuf struct {
	args [txArgs]any
	n    int
	cmds [3*maxPath + 1]redis.Cmder
	nc   int
	// The commands themselves, reused with the buffer: a go-redis command
	// built with NewIntCmd is an allocation each.
	ints   [3 * maxPath]redis.IntCmd
	ni     int
	slices [1]redis.SliceCmd
	ns     int
}

// txArgs bounds the arguments of one transaction: the admit's HMGET (2 +
// maxPath), ZADD (4) and ZCARD (2) per gate; the release's ZREM (3), ZCARD
// (2) per gate and HMGET (fewer).
const txArgs = 2 + 7*maxPath

var txPool = sync.Pool{New: func() any { return new(txBuf) }}

func getTxBuf() *txBuf { return txPool.Get().(*txBuf) }

// put returns b to the pool, dropping what it refers to.
func (b *txBuf) put() {
	clear(b.args[:b.n])
	clear(b.cmds[:b.nc])
	clear(b.ints[:b.ni])
	clear(b.slices[:b.ns])
	b.n, b.nc, b.ni, b.ns = 0, 0, 0, 0
	txPool.Put(b)
}

// argv returns the next n argument slots, to be filled by the caller.
func (b *txBuf) argv(n int) []any {
	a := b.args[b.n : b.n+n : b.n+n]
	b.n += n
	return a
}

func (b *txBuf) intCmd(args ...any) *redis.IntCmd {
	cmd := &b.ints[b.ni]
	b.ni++
	*cmd = *redis.NewIntCmd(context.Background(), args...)
	b.cmds[b.nc] = cmd
	b.nc++
	return cmd
}

func (b *txBuf) sliceCmd(args ...any) *redis.SliceCmd {
	cmd := &b.slices[b.ns]
	b.ns++
	*cmd = *redis.NewSliceCmd(context.Background(), args...)
	b.cmds[b.nc] = cmd
	b.nc++
	return cmd
}

// hmgetQueued adds an HMGET of 'queued' for gate keys keys.
func (b *txBuf) hmgetQueued(queued any, keys []any) *redis.SliceCmd {
	a := b.argv(2 + len(keys))
	a[0], a[1] = "hmget", queued
	copy(a[2:], keys)
	return b.sliceCmd(a...)
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
func (c *Controller) admitTx(member string, gates []gateCap) (found [maxPath]int64, waiting uint8, ok bool, err error) {
	var exp any = time.Now().UnixMilli() + c.clockOff.Load() + c.ttl.Milliseconds()
	var m any = member
	b := getTxBuf()
	defer b.put()
	var keys [maxPath]any
	for i, g := range gates {
		keys[i] = g.key
	}
	hm := b.hmgetQueued(c.queuedArg, keys[:len(gates)])
	var held [maxPath]*redis.IntCmd
	for i, g := range gates {
		a := b.argv(6)
		a[0], a[1], a[2], a[3] = "zadd", g.hKey, exp, m
		a[4], a[5] = "zcard", g.hKey
		b.intCmd(a[:4]...)
		held[i] = b.intCmd(a[4:]...)
	}
	if err := c.co.runTx(b.cmds[:b.nc]); err != nil {
		return found, 0, false, fmt.Errorf("cluster: admit: %w", err)
	}
	queued := hm.Val()
	ok = true
	for i, g := range gates {
		if i < len(queued) && queued[i] != nil {
			ok = false
			waiting |= 1 << i
		}
		n := held[i].Val()
		if n > g.cap {
			ok = false
		}
		found[i] = n - 1
	}
	if ok {
		return found, 0, true, nil
	}
	// Taken back: a release that wakes the first in line only where the
	// gate has room without this lease (elsewhere the lease changed nothing
	// a waiter's re-check could see).
	var hkeys [maxPath]any
	var caps [maxPath]int64
	for i, g := range gates {
		hkeys[i], caps[i] = g.hKey, g.cap
	}
	if _, err := c.releaseTxCapped(member, keys[:len(gates)], hkeys[:len(gates)], caps[:len(gates)]); err != nil {
		return found, 0, false, fmt.Errorf("cluster: admit: take back: %w", err)
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
	var capped [maxPath]gateCap
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
		capped[nc] = gateCap{g.hKeyArg, g.keyArg, g.capArg, int64(g.cap)}
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
			now := c.now()
			j := 0
			for _, g := range w.path {
				if g.cap > 0 && j < nc {
					g.seen = now
					g.count = max(g.count, g.counted(int(found[j])))
					if waiting&(1<<j) != 0 {
						g.queued = max(g.queued, 1)
					}
					j++
				}
			}
			c.mu.Unlock()
			return false, nil
		}
		vals = found[:nc]
	} else if nc > 0 {
		var buf [2 + 2*maxPath]any
		args := append(buf[:0], w.member, c.ttlArg)
		for _, g := range capped[:nc] {
			args = append(args, g.key, g.capArg)
		}
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
