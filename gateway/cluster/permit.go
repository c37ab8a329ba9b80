package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/redis/go-redis/v9"
)

// lease is a grant whose slots are leases in Redis, or will be: a grant the
// fallback admitted while Redis was away is entered in the ledger when Redis
// returns (rejoin).
type lease struct {
	c      *Controller
	member string
	path   []*gateState
	start  time.Time
	waited time.Duration
	// found is, per gate of path, the holders the admitting script found
	// there across the cluster (-1: uncapped, or admitted fail-open).
	found [maxPath]int32
	// Guarded by c.mu:
	released bool
	// unleased has bit i set when path[i] holds no lease in Redis: it was
	// uncapped when the grant was admitted (waiter.unleased) and has not
	// been capped since.
	unleased uint8
	// lost has bit i set once the lease on path[i] was found expired and
	// counted in LostLeases, so it is neither renewed nor counted again.
	lost uint8
	// fb is the fallback's permit of a grant admitted fail-open and not yet
	// in the ledger (it is in Controller.pending); nil once it is, and for
	// grants admitted through Redis.
	fb *admission.Permit
}

// Release gives the slots back (one round trip) and wakes the waiters of
// every gate of the path, on every replica. If Redis cannot be reached the
// leases lapse by themselves within the lease TTL. A grant the fallback
// admitted that is not in the ledger yet goes back to the fallback only.
func (l *lease) Release() {
	if l == nil || len(l.path) == 0 {
		return
	}
	if err := l.release(context.Background(), true); err != nil && unreachable(err) {
		l.c.markDown(err)
	}
}

var _ admission.ClusterInFlight = (*lease)(nil)

// InFlightAt implements admission.ClusterInFlight: the requests holding
// gateKey across the cluster right after this one was admitted, itself
// included, as the admitting script counted them (false for an uncapped gate,
// a gate not on the path, or a grant admitted fail-open).
func (l *lease) InFlightAt(gateKey string) (int, bool) {
	if l == nil {
		return 0, false
	}
	for i, g := range l.path {
		if g.key == gateKey {
			if f := l.found[i]; f >= 0 {
				return int(f) + 1, true
			}
			return 0, false
		}
	}
	return 0, false
}

// Waited is how long the request waited to be admitted.
func (l *lease) Waited() time.Duration {
	if l == nil {
		return 0
	}
	return l.waited
}

// release gives the leases back: through the coalescer when coalesce is set
// (Release; ctx is then unused), else in a call of its own bounded by ctx
// (Close).
func (l *lease) release(ctx context.Context, coalesce bool) error {
	c := l.c
	hold := time.Since(l.start)
	c.mu.Lock()
	if l.released {
		c.mu.Unlock()
		return nil
	}
	l.released = true
	if fb := l.fb; fb != nil {
		l.fb = nil
		delete(c.pending, l)
		for _, g := range l.path {
			g.pending--
		}
		c.mu.Unlock()
		fb.Release()
		return nil
	}
	delete(c.leases, l)
	var buf [1 + maxPath]any
	var hkeys [maxPath]any
	args := append(buf[:0], l.member)
	for i, g := range l.path {
		g.held--
		g.count = max(g.count-1, 0)
		g.observeHold(hold)
		if (l.lost|l.unleased)&(1<<i) != 0 {
			continue // counted lost already, or never leased: nothing to give back
		}
		hkeys[len(args)-1] = g.hKeyArg
		args = append(args, g.keyArg)
	}
	c.mu.Unlock()
	sent := len(args) - 1
	if sent == 0 {
		return nil
	}
	var n int
	var err error
	switch {
	case coalesce && c.txRelease:
		n, err = c.releaseTx(l.member, args[1:], hkeys[:sent])
	case coalesce:
		n, err = c.co.run(releaseScript, c.keys.queuedKeys, args).Int()
	default:
		n, err = releaseScript.Run(ctx, c.rdb, c.keys.queuedKeys, args...).Int()
	}
	if err != nil {
		return fmt.Errorf("cluster: release %s: %w", l.member, err)
	}
	if n < sent {
		c.mu.Lock()
		c.lostLeases += int64(sent - n)
		c.mu.Unlock()
		c.log.Warn("cluster: released a permit whose lease had expired",
			slog.String("member", l.member), slog.Int("gates", len(l.path)), slog.Int("still_held", n))
	}
	return nil
}

// fallbackPermit is a permit from the in-process controller used while
// Redis is away, for an empty path (nothing to enter in the ledger); it
// counts the time spent waiting in Redis before the switch.
type fallbackPermit struct {
	*admission.Permit
	before time.Duration
}

// Waited is the whole wait, in Redis and in the fallback controller.
func (p fallbackPermit) Waited() time.Duration { return p.before + p.Permit.Waited() }

// releaseTx gives back member's leases on gates (their keys, and their
// holders keys in hkeys) as one MULTI/EXEC transaction of plain commands — a
// ZREM per gate, then one HMGET of 'queued' — through the coalescer: no
// script, so none of a script call's fixed cost in Redis. Where a slot was
// freed while somebody waited there, the wake script then publishes the
// first in line (one more round trip, only when contended). Releasing and
// then reading who waits is enough (release.lua does the same in one
// script): a waiter queued before the HMGET is seen by it, and one whose
// acquire script ran after the ZREM saw the slot free. Returns how many
// leases were still there.
func (c *Controller) releaseTx(member string, gates, hkeys []any) (int, error) {
	return c.releaseTxCapped(member, gates, hkeys, nil)
}

// releaseTxCapped is releaseTx that, with caps (one per gate), also counts
// each gate's holders after the ZREM and wakes only where they are below
// the cap: for a lease taken back by admitTx, whose waiters on a gate that
// is full anyway lost nothing to it.
func (c *Controller) releaseTxCapped(member string, gates, hkeys []any, caps []int64) (int, error) {
	b := getTxBuf()
	defer b.put()
	var m any = member
	var removed, held [maxPath]*redis.IntCmd
	for i, h := range hkeys {
		a := b.argv(3)
		a[0], a[1], a[2] = "zrem", h, m
		removed[i] = b.intCmd(a...)
	}
	hm := b.hmgetQueued(c.queuedArg, gates)
	if caps != nil {
		for i, h := range hkeys {
			a := b.argv(2)
			a[0], a[1] = "zcard", h
			held[i] = b.intCmd(a...)
		}
	}
	if err := c.co.runTx(b.cmds[:b.nc]); err != nil {
		return 0, err
	}
	waiting := hm.Val()
	n := 0
	var wake []any
	for i := range gates {
		if removed[i].Val() != 1 {
			continue
		}
		n++
		if i >= len(waiting) || waiting[i] == nil {
			continue
		}
		if caps != nil && held[i].Val() >= caps[i] {
			continue
		}
		wake = append(wake, gates[i])
	}
	if len(wake) > 0 {
		ctx, cancel := c.op()
		defer cancel()
		if err := wakeScript.Run(ctx, c.rdb, c.keys.queuedKeys, wake...).Err(); err != nil {
			return n, fmt.Errorf("wake: %w", err)
		}
	}
	return n, nil
}
