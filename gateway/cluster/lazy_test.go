package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// ledgerWrites counts the writes to Redis that carry leases given or given
// back (a ZADD or a ZREM): the admit and release transactions, not the
// controller's background calls (subscriptions, heartbeats), which may fall
// in a test's window when the machine is slow.
type ledgerWrites struct {
	mu sync.Mutex
	n  int
}

func (h *ledgerWrites) take() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.n
	h.n = 0
	return n
}

func (h *ledgerWrites) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if n := c.Name(); n == "zadd" || n == "zrem" {
			h.mu.Lock()
			h.n++
			h.mu.Unlock()
			return
		}
	}
}

func (h *ledgerWrites) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *ledgerWrites) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *ledgerWrites) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(cmds...)
		return next(ctx, cmds)
	}
}

// lazyController is one replica whose lazy releases wait as long as wait
// for another call's pipeline, with its ledger writes counted. quiet sets
// the heartbeat and the periodic re-check an hour apart; otherwise a waiter
// whose wake-up message is lost (published before the replica subscribed)
// is re-checked within the usual 200 ms.
func lazyController(t *testing.T, caps map[string]int, wait time.Duration, quiet bool) (*Controller, *ledgerWrites) {
	t.Helper()
	rdb := newClient(t, shared.sock)
	trips := &ledgerWrites{}
	rdb.AddHook(trips)
	opts := Options{Prefix: uniquePrefix(t)}
	if quiet {
		opts.LeaseTTL, opts.Recheck = time.Hour, time.Hour
	}
	c := newController(t, rdb, opts)
	c.mu.Lock()
	c.keepIdle = 0 // releases go to Redis, lazily or not: nothing is kept
	c.mu.Unlock()
	c.co.mu.Lock()
	c.co.lazyWait = wait
	c.co.mu.Unlock()
	c.SetCaps(caps)
	return c, trips
}

// soonUnsent gives a back with ReleaseSoon after counting its admission's
// writes out, and checks that the release wrote nothing to Redis and that
// the one lease on holders is still there (held by what why says).
func soonUnsent(t *testing.T, a admission.Grant, trips *ledgerWrites, holders, why string) {
	t.Helper()
	trips.take()
	soon(t, a)
	if n := trips.take(); n != 0 {
		t.Fatalf("ReleaseSoon on a roomy gate wrote %d times, want none", n)
	}
	if n := zcard(t, shared.client(t), holders); n != 1 {
		t.Fatalf("%d leases on %s after ReleaseSoon, want 1: %s", n, holders, why)
	}
}

// TestLazyReleaseRidesTheNextCall: a release through gates with room to
// spare (ReleaseSoon) sends nothing of its own: it waits for the next call's
// pipeline and goes in it, ahead of that call's commands, so an admit and
// the release before it cost one round trip (one write carrying ledger
// commands). Close sends a release still
// waiting, at once.
func TestLazyReleaseRidesTheNextCall(t *testing.T) {
	const gate = "connection:c1"
	c, trips := lazyController(t, map[string]int{gate: 10}, time.Hour, true)
	stats := shared.client(t)
	holders := c.keys.holders(gate)
	req := admission.Request{Gates: path("global", gate)}

	soonUnsent(t, mustTryAcquire(t, c, req), trips, holders, "a lazy release not sent yet")
	b := mustTryAcquire(t, c, req)
	if n := trips.take(); n != 1 {
		t.Errorf("admit with a lazy release queued: %d ledger writes, want 1", n)
	}
	if n := zcard(t, stats, holders); n != 1 {
		t.Errorf("%d leases on %s after the next admit, want 1: the lazy release did not ride in its pipeline", n, gate)
	}
	soon(t, b)
	closed := make(chan error, 1)
	go func() { closed <- c.Close(context.WithoutCancel(t.Context())) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a lazy release's timer instead of sending it")
	}
	if n := zcard(t, stats, holders); n != 0 {
		t.Errorf("%d leases left on %s after Close", n, gate)
	}
}

// TestLazyReleaseSentByItsTimer: with no other call to ride in, a lazy
// release goes to Redis on its own within lazyWait.
func TestLazyReleaseSentByItsTimer(t *testing.T) {
	const gate = "connection:c1"
	c, trips := lazyController(t, map[string]int{gate: 10}, lazyWait, true)
	sentByItself(t, c, trips, gate, nil)
}

// sentByItself gives a permit on gate back with ReleaseSoon, with no other
// call to follow it, and checks that the lease leaves Redis by itself, in
// one write. between, if set, runs right after ReleaseSoon.
func sentByItself(t *testing.T, c *Controller, trips *ledgerWrites, gate string, between func()) {
	t.Helper()
	a := mustTryAcquire(t, c, admission.Request{Gates: path("global", gate)})
	trips.take()
	soon(t, a)
	if between != nil {
		between()
	}
	waitFor(t, 10*time.Second, "the lease to leave Redis", func() bool {
		return zcard(t, shared.client(t), c.keys.holders(gate)) == 0
	})
	if n := trips.take(); n != 1 {
		t.Errorf("the lease left Redis in %d writes, want 1", n)
	}
}

// TestReleaseNotLazyWhereItCounts: a release goes to Redis at once, without
// waiting for another call, when the slot may be wanted: the gate was more
// than half full with it, or somebody waits on the gate. A cap of one is
// never roomy.
func TestReleaseNotLazyWhereItCounts(t *testing.T) {
	t.Run("more than half full", func(t *testing.T) {
		const gate = "connection:c1"
		c, _ := lazyController(t, map[string]int{gate: 3}, time.Hour, false)
		stats := shared.client(t)
		req := admission.Request{Gates: path(gate)}
		held := []admission.Grant{mustTryAcquire(t, c, req), mustTryAcquire(t, c, req)}
		soon(t, held[1]) // two of three held with it: sent now
		waitFor(t, 10*time.Second, "the release to reach Redis", func() bool {
			return zcard(t, stats, c.keys.holders(gate)) == 1
		})
		// One of three with it: lazy, so it stays until the next call.
		soon(t, held[0])
		if n := zcard(t, stats, c.keys.holders(gate)); n != 1 {
			t.Errorf("%d leases after a release at a third of the cap, want 1 (lazy)", n)
		}
	})
	t.Run("cap of one", func(t *testing.T) {
		const gate = "model:c1:glm-5"
		c, _ := lazyController(t, map[string]int{gate: 1}, time.Hour, false)
		stats := shared.client(t)
		soon(t, mustTryAcquire(t, c, admission.Request{Gates: path(gate)}))
		waitFor(t, 10*time.Second, "the release to reach Redis", func() bool {
			return zcard(t, stats, c.keys.holders(gate)) == 0
		})
	})
	t.Run("the gate a waiter waits for", func(t *testing.T) {
		const gate = "connection:c1"
		c, _ := lazyController(t, map[string]int{gate: 4}, time.Hour, false)
		req := admission.Request{Gates: path(gate), MaxWait: time.Minute}
		var held []admission.Grant
		for range 4 {
			held = append(held, mustTryAcquire(t, c, req))
		}
		ch := acquireAsync(t.Context(), c, req)
		waitFor(t, 10*time.Second, "the fifth request to wait", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.gates[gate] != nil && c.gates[gate].waiting > 0
		})
		soon(t, held[0])
		r := recv(t, ch, 10*time.Second)
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.p.Release()
		for _, g := range held[1:] {
			g.Release()
		}
	})
}

// TestLazyReleaseGreedyAcrossReplicas: the greedy run of
// TestReleaseSoonGreedyAcrossReplicas on gates with room to spare, so that
// many releases ride lazily (counted), every permit given back with
// ReleaseSoon: no gate holds more than its cap at once, on a connection of
// 32 and on a model gate of 3 that binds below it (4 workers); every request ends
// admitted or hung up, none waits on a slot held back by a lazy release
// past its minute, and Close leaves no lease.
func TestLazyReleaseGreedyAcrossReplicas(t *testing.T) {
	const conn, model, other = "connection:lazy", "model:lazy:m", "model:lazy:other"
	caps := map[string]int{conn: 32, model: 3}
	reps := replicas(t, 2, caps, Options{})
	for _, c := range reps {
		c.mu.Lock()
		c.keepIdle = 0 // every release goes to Redis (kept leases: keep_test.go)
		c.mu.Unlock()
	}
	greedy(t, reps, caps, func(w int) []string {
		if w%6 == 0 {
			return []string{conn, model}
		}
		return []string{conn, other}
	}, func(t *testing.T, _ int, g admission.Grant) { soon(t, g) })
	lazied := 0
	for _, c := range reps {
		c.co.mu.Lock()
		lazied += c.co.lazied
		c.co.mu.Unlock()
	}
	if lazied == 0 {
		t.Error("no release rode lazily: the run did not exercise the rule")
	}
	t.Logf("%d of the releases queued lazily", lazied)
}
