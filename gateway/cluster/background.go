package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// maintain renews leases and the replica's registration every TTL/3,
// re-checks local waiters every Recheck, probes Redis while it is away, and
// keeps the wake-up subscriptions in line with the capped gates.
func (c *Controller) maintain(ctx context.Context) {
	defer c.wg.Done()
	renewTick := time.NewTicker(c.ttl / 3)
	defer renewTick.Stop()
	recheckTick := time.NewTicker(c.recheck)
	defer recheckTick.Stop()
	c.syncSubscriptions()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.subSync:
			c.syncSubscriptions()
		case <-renewTick.C:
			c.heartbeat(ctx)
		case <-recheckTick.C:
			if c.down.Load() {
				c.heartbeat(ctx)
			}
			c.mu.Lock()
			for _, g := range c.gates {
				g.kickHeads()
			}
			c.mu.Unlock()
		}
	}
}

// heartbeat renews and switches modes on the outcome: to the fail mode when
// Redis cannot be reached, back to shared caps through rejoin.
func (c *Controller) heartbeat(ctx context.Context) {
	err := c.renew(ctx)
	if err == nil {
		c.mu.Lock()
		tidy := c.down.Load() || len(c.orphans) > 0
		c.mu.Unlock()
		if tidy {
			err = c.rejoin(ctx)
		}
	}
	if err != nil && ctx.Err() == nil {
		c.markDown(err)
	}
}

// rejoinRounds bounds how often rejoin starts over because the fallback
// admitted more meanwhile; the next heartbeat (every Recheck while Redis
// is away) carries on.
const rejoinRounds = 3

// rejoin puts the ledger straight once Redis answers again, then switches
// back to shared caps: in one script it enters every fail-open permit still
// running as a lease of each gate on its path, and removes the queue entries
// of waiters this replica dropped while Redis was away. It switches back only
// when no fail-open permit was admitted meanwhile, under c.mu, which
// failOpen holds too: so nothing is admitted through Redis while a fail-open
// permit still runs outside the ledger.
func (c *Controller) rejoin(ctx context.Context) error {
	for range rejoinRounds {
		c.mu.Lock()
		adds := make([]*lease, 0, len(c.pending))
		for l := range c.pending {
			adds = append(adds, l)
		}
		orphans := len(c.orphans)
		keys, args, any := c.rejoinArgs(c.orphans, adds)
		c.mu.Unlock()

		if any {
			opCtx, cancel := context.WithTimeout(ctx, c.opTimeout)
			err := rejoinScript.Run(opCtx, c.rdb, keys, args...).Err()
			cancel()
			if err != nil {
				return fmt.Errorf("cluster: rejoin: %w", err)
			}
		}

		c.mu.Lock()
		c.orphans = c.orphans[orphans:]
		if len(c.orphans) == 0 {
			c.orphans = nil
		}
		var entered []*admission.Permit
		var gone []*lease
		for _, l := range adds {
			if l.released {
				// Released to the fallback while the script ran, which
				// entered it: take it out again.
				gone = append(gone, l)
				continue
			}
			delete(c.pending, l)
			entered = append(entered, l.fb)
			l.fb = nil
			c.leases[l] = struct{}{}
			for _, g := range l.path {
				g.pending--
				g.held++
				g.count++
			}
		}
		up := len(c.pending) == 0
		wasDown := up && c.down.Swap(false)
		c.mu.Unlock()

		// The fallback need not count them any more: they count in Redis.
		for _, p := range entered {
			p.Release()
		}
		for _, l := range gone {
			if err := c.dropLease(ctx, l); err != nil {
				return err
			}
		}
		if up {
			if wasDown {
				c.log.Info("cluster: Redis reachable again; shared caps resume",
					slog.Int("fail_open_permits_entered", len(entered)), slog.Int("queue_entries_removed", orphans))
			}
			return nil
		}
	}
	return nil
}

// rejoinArgs builds the rejoin script's keys and arguments, and reports
// whether there is anything to do. Queue entries older than two renew
// periods have lapsed already and are left out. c.mu must be held.
func (c *Controller) rejoinArgs(orphans []orphan, adds []*lease) ([]string, []any, bool) {
	lapse := 2 * c.ttl / 3
	keys := []string{c.keys.queued}
	args := []any{c.ttl.Milliseconds(), 0, 0}
	n := 0
	for _, o := range orphans {
		if time.Since(o.at) > lapse {
			continue
		}
		keys = append(keys, o.qgate.wKey)
		args = append(args, o.member, o.entry, o.gate.key, o.gate.cap)
		n++
	}
	args[1] = n
	m := 0
	for _, l := range adds {
		for _, g := range l.path {
			args = append(args, l.member, g.key)
			m++
		}
	}
	args[2] = m
	return keys, args, n+m > 0
}

// removeOrphans removes the queue entries left by waiters dropped while
// Redis was away (at Close).
func (c *Controller) removeOrphans(ctx context.Context) error {
	c.mu.Lock()
	orphans := len(c.orphans)
	keys, args, any := c.rejoinArgs(c.orphans, nil)
	c.mu.Unlock()
	if !any {
		return nil
	}
	if err := rejoinScript.Run(ctx, c.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("cluster: remove queue entries: %w", err)
	}
	c.mu.Lock()
	c.orphans = c.orphans[orphans:]
	c.mu.Unlock()
	return nil
}

// dropLease removes from Redis the leases of l, a fail-open grant released
// while rejoin entered it.
func (c *Controller) dropLease(ctx context.Context, l *lease) error {
	args := make([]any, 0, 1+len(l.path))
	args = append(args, l.member)
	for _, g := range l.path {
		args = append(args, g.key)
	}
	opCtx, cancel := context.WithTimeout(ctx, c.opTimeout)
	defer cancel()
	if err := releaseScript.Run(opCtx, c.rdb, c.keys.queuedKeys, args...).Err(); err != nil {
		return fmt.Errorf("cluster: release %s: %w", l.member, err)
	}
	return nil
}

// renew runs the renew script: the replica's registration, every lease and
// queue entry it owns, and the counts of its capped gates.
func (c *Controller) renew(ctx context.Context) error {
	type owned struct {
		l    *lease
		gate int // index in l.path
		w    *waiter
	}
	c.mu.Lock()
	keys := []string{c.keys.replicas}
	members := []any{}
	var entries []owned
	for l := range c.leases {
		for i, g := range l.path {
			if (l.lost|l.unleased)&(1<<i) != 0 {
				continue
			}
			keys = append(keys, g.hKey)
			members = append(members, l.member)
			entries = append(entries, owned{l: l, gate: i})
		}
	}
	nLeases := len(entries)
	for w := range c.waiters {
		if w.on < 0 {
			continue
		}
		keys = append(keys, w.path[w.on].xKey, w.qgate.wKey)
		members = append(members, w.entry, w.member)
		entries = append(entries, owned{w: w}, owned{w: w})
	}
	var capped []*gateState
	for _, g := range c.gates {
		if g.cap > 0 {
			capped = append(capped, g)
			keys = append(keys, g.hKey, g.xKey) // x: every class's waiters
		}
	}
	c.mu.Unlock()

	args := append([]any{c.replica, c.ttl.Milliseconds(), len(entries), nLeases, len(capped)}, members...)
	opCtx, cancel := context.WithTimeout(ctx, c.opTimeout)
	defer cancel()
	sent := time.Now()
	res, err := renewScript.Run(opCtx, c.rdb, keys, args...).Slice()
	if err != nil {
		return fmt.Errorf("cluster: renew: %w", err)
	}
	replicas, lost, counts, redisNow, err := parseRenew(res)
	if err != nil {
		return err
	}
	if redisNow > 0 {
		// Redis read its clock somewhere in the round trip: take the middle.
		mid := sent.Add(time.Since(sent) / 2)
		c.clockOff.Store(redisNow - mid.UnixMilli())
		c.clockKnown.Store(true)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if replicas != c.replicas {
		c.replicas = replicas
		c.fallback.SetCaps(c.sharedCaps())
	}
	lostLeases := 0
	for _, i := range lost {
		if i < 1 || i > len(entries) {
			continue
		}
		e := entries[i-1]
		switch {
		case e.l != nil:
			// Counted once: a lost lease is not renewed, nor counted by
			// its Release.
			if bit := uint8(1) << e.gate; !e.l.released && e.l.lost&bit == 0 {
				e.l.lost |= bit
				lostLeases++
			}
		case e.w != nil && e.w.on >= 0:
			e.w.kick() // its next attempt queues it again, with the tag it gets then
		}
	}
	if lostLeases > 0 {
		c.lostLeases += int64(lostLeases)
		c.log.Warn("cluster: leases expired before renewal; caps may be exceeded until those requests end",
			slog.Int("lost", lostLeases))
	}
	now := c.now()
	for j, g := range capped {
		if 2*j+1 < len(counts) {
			g.seen = now
			g.count, g.queued = g.counted(int(counts[2*j])), int(counts[2*j+1])
		}
	}
	return nil
}

func parseRenew(res []any) (replicas int, lost []int, counts []int64, now int64, err error) {
	if len(res) != 4 {
		return 0, nil, nil, 0, errors.New("cluster: renew: malformed reply")
	}
	now, _ = res[3].(int64)
	n, ok := res[0].(int64)
	if !ok {
		return 0, nil, nil, 0, errors.New("cluster: renew: malformed replica count")
	}
	lostRaw, _ := res[1].([]any)
	for _, v := range lostRaw {
		if i, ok := v.(int64); ok {
			lost = append(lost, int(i))
		}
	}
	countRaw, _ := res[2].([]any)
	for _, v := range countRaw {
		i, _ := v.(int64)
		counts = append(counts, i)
	}
	return max(int(n), 1), lost, counts, now, nil
}

// markDown switches to the fail mode (once) and wakes every local waiter so
// it follows at once.
func (c *Controller) markDown(err error) {
	c.mu.Lock()
	c.downErr = err
	if c.down.Swap(true) {
		c.mu.Unlock()
		return
	}
	for w := range c.waiters {
		w.kick()
	}
	c.mu.Unlock()
	c.log.Warn("cluster: Redis unreachable or failing; admission runs "+c.mode.String(), slog.Any("error", err))
}

// listen turns wake-up messages into kicks: of the waiter a message names
// (first in line on the channel's gate), if it is this replica's.
func (c *Controller) listen(ctx context.Context) {
	defer c.wg.Done()
	prefix := c.keys.channelPrefix()
	var pause *time.Timer
	for {
		msg, err := c.ps.ReceiveTimeout(ctx, c.recheck)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// The connection is gone; the next call redials and resubscribes.
			// Pause so an absent Redis is not spun on.
			if pause == nil {
				pause = time.NewTimer(c.recheck / 4)
			} else {
				pause.Reset(c.recheck / 4)
			}
			select {
			case <-ctx.Done():
				pause.Stop()
				return
			case <-pause.C:
			}
			continue
		}
		m, ok := msg.(*redis.Message)
		if !ok {
			continue
		}
		channel := m.Channel
		key, found := strings.CutPrefix(channel, prefix)
		if !found {
			continue
		}
		c.mu.Lock()
		if g := c.gates[key]; g != nil {
			g.wakes++
			g.wake(m.Payload)
		}
		c.mu.Unlock()
	}
}

// syncSubscriptions subscribes to the wake-up channel of every capped gate
// (only a capped gate ever makes a request wait) and drops the others.
func (c *Controller) syncSubscriptions() {
	c.mu.Lock()
	want := make(map[string]bool)
	for _, g := range c.gates {
		if g.cap > 0 {
			want[g.channel] = true
		}
	}
	var add, drop []string
	for ch := range want {
		if !c.subscribed[ch] {
			add = append(add, ch)
		}
	}
	for ch := range c.subscribed {
		if !want[ch] {
			drop = append(drop, ch)
		}
	}
	c.subscribed = want
	c.mu.Unlock()
	ctx, cancel := c.op()
	defer cancel()
	// On failure go-redis keeps the channel list and subscribes again when
	// it reconnects, so there is nothing to retry here.
	if len(add) > 0 {
		_ = c.ps.Subscribe(ctx, add...)
	}
	if len(drop) > 0 {
		_ = c.ps.Unsubscribe(ctx, drop...)
	}
}
