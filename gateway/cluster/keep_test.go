package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// keepController is lazyController (quiet, lazy releases sent within
// lazyWait) with kept leases waiting idle to be taken over, and the gates'
// counts good for fresh.
func keepController(t *testing.T, caps map[string]int, idle, fresh time.Duration) (*Controller, *ledgerWrites) {
	t.Helper()
	c, trips := lazyController(t, caps, lazyWait, true)
	c.mu.Lock()
	c.keepIdle, c.keepFresh = idle, fresh
	c.mu.Unlock()
	return c, trips
}

// counts reads how many leases c keeps and how many it handed over.
func counts(c *Controller) (kept int, takenOver int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.nKept.Load()), c.takenOver
}

// TestKeptLeaseTakenOver: a permit given back with ReleaseSoon through a
// gate with room to spare keeps its lease in Redis, and the next request on
// the same path takes it over: neither the release nor that admission writes
// to Redis, and the gate's holders stay one. A request on another path does
// not take it. A second Release by the first holder does not give back the
// lease now in use; a Release (waited for) gives it back at once; Close gives
// back a lease still kept.
func TestKeptLeaseTakenOver(t *testing.T) {
	const conn, model, other = "connection:k1", "model:k1:m", "model:k1:other"
	c, trips := keepController(t, map[string]int{conn: 10}, time.Hour, time.Hour)
	stats := shared.client(t)
	holders := c.keys.holders(conn)
	req := admission.Request{Gates: path("global", conn, model)}

	a := mustTryAcquire(t, c, req)
	soonUnsent(t, a, trips, holders, "the kept lease")
	if kept, _ := counts(c); kept != 1 {
		t.Fatalf("%d leases kept, want 1", kept)
	}

	elsewhere := mustTryAcquire(t, c, admission.Request{Gates: path("global", conn, other)})
	if _, over := counts(c); over != 0 {
		t.Fatal("a request on another path took over the kept lease")
	}
	elsewhere.Release()
	trips.take()

	b := mustTryAcquire(t, c, req)
	if n := trips.take(); n != 0 {
		t.Errorf("admission on a kept lease wrote %d times, want none", n)
	}
	if kept, over := counts(c); kept != 0 || over != 1 {
		t.Errorf("after the take-over: %d kept, %d taken over; want 0 and 1", kept, over)
	}
	if n, ok := b.(admission.ClusterInFlight).InFlightAt(conn); !ok || n != 1 {
		t.Errorf("InFlightAt(%s) = %d, %v; want 1, true", conn, n, ok)
	}
	for _, s := range c.Stats() {
		if s.Key == conn && s.InFlight != 1 {
			t.Errorf("Stats: %s in flight %d, want 1", conn, s.InFlight)
		}
	}
	a.Release() // the first holder again: its permit ended already
	if n := zcard(t, stats, holders); n != 1 {
		t.Fatalf("%d leases on %s after the first holder released twice, want 1 (the second holder's)", n, conn)
	}
	b.Release()
	if n := zcard(t, stats, holders); n != 0 {
		t.Errorf("%d leases on %s after Release, want 0: a release waited for keeps nothing", n, conn)
	}

	soon(t, mustTryAcquire(t, c, req))
	if kept, _ := counts(c); kept != 1 {
		t.Fatalf("%d leases kept before Close, want 1", kept)
	}
	if err := c.Close(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	if n := zcard(t, stats, holders); n != 0 {
		t.Errorf("%d leases on %s after Close, want 0", n, conn)
	}
}

// TestKeptLeaseGivenBack: a kept lease that no request takes over goes back
// to Redis by itself once keepIdle is past (the keep timer), in one write.
func TestKeptLeaseGivenBack(t *testing.T) {
	const gate = "connection:k2"
	c, trips := keepController(t, map[string]int{gate: 10}, time.Hour, time.Hour)
	sentByItself(t, c, trips, gate, func() {
		if kept, _ := counts(c); kept != 1 {
			t.Fatalf("%d leases kept, want 1", kept)
		}
		c.mu.Lock()
		c.keepIdle = time.Nanosecond
		c.keepTimer.Reset(time.Nanosecond) // as if the hour had passed
		c.mu.Unlock()
	})
	if kept, over := counts(c); kept != 0 || over != 0 {
		t.Errorf("%d kept, %d taken over; want none", kept, over)
	}
}

// TestLeaseNotKeptWhereItCounts: a release goes to Redis, keeping nothing,
// when the slot may be wanted or this replica cannot tell: the gate was more
// than half full with the kept leases and this one, its cap is one, Redis's
// count of it is older than keepFresh, or it was released with Release. A
// kept lease is not taken over when its gate's count is old, when somebody
// waits there, or when its lease expired.
func TestLeaseNotKeptWhereItCounts(t *testing.T) {
	const gate = "connection:k3"
	req := admission.Request{Gates: path(gate)}
	notKept := func(t *testing.T, c *Controller, want int) {
		t.Helper()
		if kept, _ := counts(c); kept != 0 {
			t.Errorf("%d leases kept, want none", kept)
		}
		waitFor(t, 10*time.Second, "the release to reach Redis", func() bool {
			return zcard(t, shared.client(t), c.keys.holders(gate)) == want
		})
	}
	t.Run("more than half full", func(t *testing.T) {
		c, _ := keepController(t, map[string]int{gate: 4}, time.Hour, time.Hour)
		held := []admission.Grant{mustTryAcquire(t, c, req), mustTryAcquire(t, c, req), mustTryAcquire(t, c, req)}
		soon(t, held[2]) // 2 held, and this one: 3 of 4
		notKept(t, c, 2)
		soon(t, held[1]) // 1 held, and this one: 2 of 4, kept
		if kept, _ := counts(c); kept != 1 {
			t.Fatalf("%d kept at half the cap, want 1", kept)
		}
		soon(t, held[0]) // 0 held, 1 kept, and this one: 2 of 4, kept
		if kept, _ := counts(c); kept != 2 {
			t.Fatalf("%d kept, want 2", kept)
		}
		// On another path through the gate (no take-over): 0 held, 2 kept
		// and this one make 3 of 4, so it goes back rather than be kept.
		soon(t, mustTryAcquire(t, c, admission.Request{Gates: path("global", gate)}))
		if kept, _ := counts(c); kept != 2 {
			t.Errorf("%d kept, want 2: the leases kept count towards half the cap", kept)
		}
		waitFor(t, 10*time.Second, "the release to reach Redis", func() bool {
			return zcard(t, shared.client(t), c.keys.holders(gate)) == 2
		})
	})
	t.Run("cap of one", func(t *testing.T) {
		c, _ := keepController(t, map[string]int{gate: 1}, time.Hour, time.Hour)
		soon(t, mustTryAcquire(t, c, req))
		notKept(t, c, 0)
	})
	t.Run("old count", func(t *testing.T) {
		c, _ := keepController(t, map[string]int{gate: 10}, time.Hour, time.Hour)
		a := mustTryAcquire(t, c, req)
		c.mu.Lock()
		c.keepFresh = time.Nanosecond
		c.mu.Unlock()
		soon(t, a)
		notKept(t, c, 0)
	})
	t.Run("Release", func(t *testing.T) {
		c, _ := keepController(t, map[string]int{gate: 10}, time.Hour, time.Hour)
		mustTryAcquire(t, c, req).Release()
		notKept(t, c, 0)
	})
	takenOver := func(t *testing.T, c *Controller, want int64) {
		t.Helper()
		g := mustTryAcquire(t, c, req)
		defer g.Release()
		if _, over := counts(c); over != want {
			t.Errorf("%d taken over, want %d", over, want)
		}
	}
	t.Run("not taken over on an old count", func(t *testing.T) {
		c, _ := keepController(t, map[string]int{gate: 10}, time.Hour, time.Hour)
		soon(t, mustTryAcquire(t, c, req))
		c.mu.Lock()
		c.keepFresh = time.Nanosecond
		c.mu.Unlock()
		takenOver(t, c, 0)
	})
	t.Run("not taken over with somebody waiting", func(t *testing.T) {
		c, _ := keepController(t, map[string]int{gate: 10}, time.Hour, time.Hour)
		soon(t, mustTryAcquire(t, c, req))
		c.mu.Lock()
		c.gates[gate].queued = 1 // as a heartbeat would have counted
		c.mu.Unlock()
		takenOver(t, c, 0)
	})
	t.Run("not taken over once lost", func(t *testing.T) {
		c, _ := keepController(t, map[string]int{gate: 10}, time.Hour, time.Hour)
		stats := shared.client(t)
		soon(t, mustTryAcquire(t, c, req))
		if err := stats.Del(t.Context(), c.keys.holders(gate)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.renew(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := c.LostLeases(); n != 1 {
			t.Fatalf("LostLeases = %d, want 1", n)
		}
		takenOver(t, c, 0)
	})
}

// TestKeptLeaseCountsAndGoesToAWaiter: a kept lease holds its slot in Redis
// for every replica, so another replica's request waits when the rest of the
// gate is full; when it goes back, that waiter gets the slot.
func TestKeptLeaseCountsAndGoesToAWaiter(t *testing.T) {
	const gate = "connection:k4"
	caps := map[string]int{gate: 2}
	reps := replicas(t, 2, caps, Options{})
	a, b := reps[0], reps[1]
	a.mu.Lock()
	a.keepIdle, a.keepFresh = time.Hour, time.Hour
	a.mu.Unlock()
	req := admission.Request{Gates: path(gate), MaxWait: time.Minute}
	soon(t, mustTryAcquire(t, a, req))
	if kept, _ := counts(a); kept != 1 {
		t.Fatalf("%d kept, want 1", kept)
	}
	held := mustTryAcquire(t, b, req)
	defer held.Release()
	if _, ok := b.TryAcquire(req); ok {
		t.Fatal("replica b admitted past a slot kept by replica a")
	}
	ch := acquireAsync(t.Context(), b, req)
	waitFor(t, 10*time.Second, "b's request to wait", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.gates[gate].waiting > 0
	})
	a.mu.Lock()
	a.keepIdle = time.Nanosecond
	a.mu.Unlock()
	a.sweepKept()
	r := recv(t, ch, 10*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.p.Release()
	if _, over := counts(a); over != 0 {
		t.Errorf("replica a took over %d kept leases, want none", over)
	}
}

// TestKeptLeaseEnteredWhereCapped: a kept lease on a gate that becomes
// capped is entered there, like a running permit's, and is taken over with
// it.
func TestKeptLeaseEnteredWhereCapped(t *testing.T) {
	const conn, model = "connection:k5", "model:k5:m"
	c, trips := keepController(t, map[string]int{conn: 10}, time.Hour, time.Hour)
	stats := shared.client(t)
	req := admission.Request{Gates: path(conn, model)}
	soon(t, mustTryAcquire(t, c, req))
	c.SetCaps(map[string]int{conn: 10, model: 5})
	if n := zcard(t, stats, c.keys.holders(model)); n != 1 {
		t.Fatalf("%d leases on %s once capped, want the kept one", n, model)
	}
	trips.take()
	g := mustTryAcquire(t, c, req)
	if _, over := counts(c); over != 1 {
		t.Errorf("%d taken over, want 1", over)
	}
	if n := trips.take(); n != 0 {
		t.Errorf("the take-over wrote %d times, want none", n)
	}
	g.Release()
	for _, k := range []string{conn, model} {
		if n := zcard(t, stats, c.keys.holders(k)); n != 0 {
			t.Errorf("%d leases on %s after Release, want 0", n, k)
		}
	}
}

// TestKeptLeasesGreedyAcrossReplicas: the greedy run of
// TestReleaseSoonGreedyAcrossReplicas with leases kept and taken over (the
// default idle and freshness), every permit given back with ReleaseSoon: no
// gate holds more than its cap at once — a connection of 48, about half
// full with 24 workers, and a model gate of 3 under it — every request ends
// admitted or hung up, and Close leaves no lease.
func TestKeptLeasesGreedyAcrossReplicas(t *testing.T) {
	const conn, model, other = "connection:keep", "model:keep:m", "model:keep:other"
	caps := map[string]int{conn: 48, model: 3}
	reps := replicas(t, 2, caps, Options{})
	greedy(t, reps, caps, func(w int) []string {
		if w%6 == 0 {
			return []string{conn, model}
		}
		return []string{conn, other}
	}, func(t *testing.T, _ int, g admission.Grant) { soon(t, g) })
	var over int64
	for _, c := range reps {
		_, n := counts(c)
		over += n
	}
	if over == 0 {
		t.Error("no kept lease was taken over: the run did not exercise the rule")
	}
	t.Logf("%d admissions took over a kept lease", over)
}
