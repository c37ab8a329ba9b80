package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
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
	// idle says whether the lease is a permit's (inUse) or kept for the next
	// request on its path (kept, since idleAt; swept: on its way back). See
	// keep.go. Guarded by c.mu.
	idle   int8
	idleAt time.Duration
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

// ReleaseSoon is Release without waiting for Redis's reply: the leases are
// queued for the next pipeline and the caller goes on (a handler to its
// connection's next request). The local counts drop at once; the slots are
// free in Redis when the pipeline is applied, after any admit this replica
// queued before and before any it queues after. A lease whose release
// fails lapses within the TTL, as with Release.
func (l *lease) ReleaseSoon() {
	if l == nil || len(l.path) == 0 {
		return
	}
	if err := l.releaseMode(context.Background(), releaseSoon); err != nil && unreachable(err) {
		l.c.markDown(err)
	}
}

var (
	_ admission.ClusterInFlight = (*lease)(nil)
	_ admission.SoonReleaser    = (*lease)(nil)
)

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

// How a lease's release goes to Redis.
const (
	releaseDirect   = iota // a call of its own, bounded by its context (Close)
	releaseCoalesce        // through the coalescer, waiting for the reply (Release)
	releaseSoon            // through the coalescer, not waiting (ReleaseSoon)
)

// release gives the leases back: through the coalescer when coalesce is set
// (Release; ctx is then unused), else in a call of its own bounded by ctx
// (Close).
func (l *lease) release(ctx context.Context, coalesce bool) error {
	if coalesce {
		return l.releaseMode(ctx, releaseCoalesce)
	}
	return l.releaseMode(ctx, releaseDirect)
}

func (l *lease) releaseMode(ctx context.Context, mode int) error {
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
	idle := l.idle != inUse // a kept lease given back: no permit ends
	if l.idle == kept {
		c.unkeep(l)
	}
	var buf [1 + maxPath]any
	var hkeys [maxPath]any
	args := append(buf[:0], l.member)
	// Only a release not waited for may ride lazily in a later pipeline.
	lazy := mode == releaseSoon
	for i, g := range l.path {
		if !idle {
			g.held--
			g.count = max(g.count-1, 0)
			g.observeHold(hold)
		}
		if (l.lost|l.unleased)&(1<<i) != 0 {
			continue // counted lost already, or never leased: nothing to give back
		}
		hkeys[len(args)-1] = g.hKeyArg
		args = append(args, g.keyArg)
		lazy = lazy && g.roomy()
	}
	if lazy && !idle && len(args) > 1 {
		if now := c.now(); c.keepable(l, now) {
			c.keep(l, now)
			c.mu.Unlock()
			return nil
		}
	}
	c.mu.Unlock()
	sent := len(args) - 1
	if sent == 0 {
		return nil
	}
	var n int
	var err error
	switch {
	case mode == releaseSoon && c.txRelease:
		c.releaseTxSoon(l.member, args[1:], hkeys[:sent], len(l.path), lazy)
		return nil
	case mode != releaseDirect && c.txRelease:
		n, err = c.releaseTx(l.member, args[1:], hkeys[:sent])
	case mode != releaseDirect:
		n, err = c.co.run(releaseScript, c.keys.queuedKeys, args).Int()
	default:
		n, err = releaseScript.Run(ctx, c.rdb, c.keys.queuedKeys, args...).Int()
	}
	if err != nil {
		return fmt.Errorf("cluster: release %s: %w", l.member, err)
	}
	c.countLost(l.member, len(l.path), sent, n)
	return nil
}

// countLost counts the leases of a release that had expired already (sent
// given back, n still there) and says so.
func (c *Controller) countLost(member string, gates, sent, n int) {
	if n >= sent {
		return
	}
	c.mu.Lock()
	c.lostLeases += int64(sent - n)
	c.mu.Unlock()
	c.log.Warn("cluster: released a permit whose lease had expired",
		slog.String("member", member), slog.Int("gates", gates), slog.Int("still_held", n))
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
	n, wake := released(gates, removed[:len(gates)], hm, caps, held[:len(gates)])
	if len(wake) > 0 {
		return n, c.wake(wake)
	}
	return n, nil
}

// released reads a release transaction's replies: how many of the leases
// were still there, and the gates where that freed a slot somebody waits
// for (with caps: and the gate is below its cap after it).
func released(gates []any, removed []*redis.IntCmd, hm *redis.SliceCmd, caps []int64, held []*redis.IntCmd) (int, []any) {
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
	return n, wake
}

// wake publishes the first in line on each of gates (wake.lua).
func (c *Controller) wake(gates []any) error {
	ctx, cancel := c.op()
	defer cancel()
	if err := wakeScript.Run(ctx, c.rdb, c.keys.queuedKeys, gates...).Err(); err != nil {
		return fmt.Errorf("wake: %w", err)
	}
	return nil
}

// softRelease is a release transaction nobody waits for (ReleaseSoon): its
// commands, and what finish needs to read their replies.
type softRelease struct {
	c       *Controller
	b       *txBuf
	member  string
	paths   int // gates on the lease's path, for the log
	gates   [maxPath]any
	ng      int
	removed [maxPath]*redis.IntCmd
	hm      *redis.SliceCmd
}

var softPool = sync.Pool{New: func() any { return new(softRelease) }}

// releaseTxSoon queues releaseTx's transaction and returns; the replies are
// read by finish, on the goroutine that sends them, which counts expired
// leases and wakes waiters as releaseTx does (the wake on a goroutine of
// its own: it is a round trip). Close waits for every one queued.
func (c *Controller) releaseTxSoon(member string, gates, hkeys []any, paths int, lazy bool) {
	r := softPool.Get().(*softRelease)
	r.c, r.member, r.paths = c, member, paths
	r.b = getTxBuf()
	r.ng = copy(r.gates[:], gates)
	var m any = member
	for i, h := range hkeys {
		a := r.b.argv(3)
		a[0], a[1], a[2] = "zrem", h, m
		r.removed[i] = r.b.intCmd(a...)
	}
	r.hm = r.b.hmgetQueued(c.queuedArg, r.gates[:r.ng])
	c.soon.Add(1)
	c.co.runTxSoon(r.b.cmds[:r.b.nc], r, lazy)
}

func (r *softRelease) finish() {
	c := r.c
	defer c.soon.Done()
	gates := r.gates[:r.ng]
	var err error
	for _, cmd := range r.b.cmds[:r.b.nc] {
		if err = cmd.Err(); err != nil {
			break
		}
	}
	if err != nil {
		if unreachable(err) {
			c.markDown(err) // the leases lapse within the TTL, as Release's do
		}
	} else {
		n, wake := released(gates, r.removed[:r.ng], r.hm, nil, nil)
		c.countLost(r.member, r.paths, r.ng, n)
		if len(wake) > 0 {
			c.soon.Add(1)
			go func() {
				defer c.soon.Done()
				if err := c.wake(wake); err != nil && unreachable(err) {
					c.markDown(err)
				}
			}()
		}
	}
	r.b.put()
	*r = softRelease{}
	softPool.Put(r)
}
