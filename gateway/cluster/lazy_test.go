package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// lazyController is one replica whose lazy releases wait as long as wait
// for another call's pipeline, with its round trips counted.
func lazyController(t *testing.T, caps map[string]int, wait time.Duration) (*Controller, *roundTrips) {
	t.Helper()
	rdb := newClient(t, shared.sock)
	trips := &roundTrips{}
	rdb.AddHook(trips)
	c := newController(t, rdb, Options{Prefix: uniquePrefix(t), LeaseTTL: time.Hour, Recheck: time.Hour})
	c.co.mu.Lock()
	c.co.lazyWait = wait
	c.co.mu.Unlock()
	c.SetCaps(caps)
	return c, trips
}

// TestLazyReleaseRidesTheNextCall: a release through gates with room to
// spare (ReleaseSoon) sends nothing of its own: it waits for the next call's
// pipeline and goes in it, ahead of that call's commands, so an admit and
// the release before it cost one round trip. Close sends a release still
// waiting, at once.
func TestLazyReleaseRidesTheNextCall(t *testing.T) {
	const gate = "connection:c1"
	c, trips := lazyController(t, map[string]int{gate: 10}, time.Hour)
	stats := shared.client(t)
	holders := c.keys.holders(gate)
	req := admission.Request{Gates: path("global", gate)}

	a := mustTryAcquire(t, c, req)
	trips.take()
	soon(t, a)
	if n := trips.take(); n != 0 {
		t.Fatalf("ReleaseSoon on a roomy gate sent %d round trips of its own, want none", n)
	}
	if n := zcard(t, stats, holders); n != 1 {
		t.Fatalf("%d leases on %s after a lazy release, want the one not sent yet", n, gate)
	}
	b := mustTryAcquire(t, c, req)
	if n := trips.take(); n != 1 {
		t.Errorf("admit with a lazy release queued: %d round trips, want 1", n)
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
	c, trips := lazyController(t, map[string]int{gate: 10}, lazyWait)
	stats := shared.client(t)
	req := admission.Request{Gates: path("global", gate)}
	a := mustTryAcquire(t, c, req)
	trips.take()
	soon(t, a)
	waitFor(t, 10*time.Second, "the lazy release to reach Redis", func() bool {
		return zcard(t, stats, c.keys.holders(gate)) == 0
	})
	if n := trips.take(); n != 1 {
		t.Errorf("the timer sent the release in %d round trips, want 1", n)
	}
}

// TestReleaseNotLazyWhereItCounts: a release goes to Redis at once, without
// waiting for another call, when the slot may be wanted: the gate was more
// than half full with it, or somebody waits on the gate. A cap of one is
// never roomy.
func TestReleaseNotLazyWhereItCounts(t *testing.T) {
	t.Run("more than half full", func(t *testing.T) {
		const gate = "connection:c1"
		c, _ := lazyController(t, map[string]int{gate: 3}, time.Hour)
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
		c, _ := lazyController(t, map[string]int{gate: 1}, time.Hour)
		stats := shared.client(t)
		soon(t, mustTryAcquire(t, c, admission.Request{Gates: path(gate)}))
		waitFor(t, 10*time.Second, "the release to reach Redis", func() bool {
			return zcard(t, stats, c.keys.holders(gate)) == 0
		})
	})
	t.Run("a waiter", func(t *testing.T) {
		const gate = "connection:c1"
		c, _ := lazyController(t, map[string]int{gate: 4}, time.Hour)
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
