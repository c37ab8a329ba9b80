package cluster

import (
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// TestNewlyCappedGateCountsRunningPermits: a gate uncapped when requests
// were admitted takes no lease from them, yet once every replica caps it,
// the permits still running through it count against the cap across the
// cluster until they are released.
func TestNewlyCappedGateCountsRunningPermits(t *testing.T) {
	const gate = "connection:nc"
	reps := replicas(t, 2, nil, Options{Recheck: time.Minute})
	a, b := reps[0], reps[1]
	req := admission.Request{Gates: path("global", gate), MaxWait: 10 * time.Second}
	p1, err := a.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if n := zcard(t, a.rdb, a.keys.holders(gate)); n != 0 {
		t.Fatalf("holders of the uncapped gate = %d, want 0 (no lease while uncapped)", n)
	}

	capped := map[string]int{gate: 1}
	a.SetCaps(capped)
	b.SetCaps(capped)
	if n := zcard(t, a.rdb, a.keys.holders(gate)); n != 1 {
		t.Fatalf("holders once capped = %d, want 1 (the running permit entered)", n)
	}
	if n := zcard(t, a.rdb, a.keys.holders("global")); n != 0 {
		t.Errorf("holders of the still uncapped global gate = %d, want 0", n)
	}
	if _, ok := b.TryAcquire(req); ok {
		t.Fatal("admitted on another replica while a permit admitted before the cap still runs")
	}
	if _, ok := a.TryAcquire(req); ok {
		t.Fatal("admitted on the same replica while a permit admitted before the cap still runs")
	}
	p1.Release()
	if n := zcard(t, a.rdb, a.keys.holders(gate)); n != 0 {
		t.Fatalf("holders after the release = %d, want 0", n)
	}
	p2, ok := b.TryAcquire(req)
	if !ok {
		t.Fatal("not admitted once the earlier permit was released")
	}
	p2.Release()
}

// TestUncappedPathNoRedisCall: a path whose gates are all uncapped is
// admitted and released without a Redis call.
func TestUncappedPathNoRedisCall(t *testing.T) {
	rdb := newClient(t, shared.sock)
	hook := &countingHook{n: make(map[string]int)}
	rdb.AddHook(hook)
	c := newController(t, rdb, Options{Prefix: uniquePrefix(t), LeaseTTL: time.Hour, Recheck: time.Hour})
	hook.take()
	p, err := c.Acquire(t.Context(), admission.Request{Gates: path(benchKeys...), MaxWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	if got := hook.take(); len(got) != 0 {
		t.Errorf("an uncapped path sent %v, want nothing", got)
	}
	if st := c.Totals(); st.Admitted != 1 {
		t.Errorf("admitted %d, want 1", st.Admitted)
	}
}

// TestAdmitTakesBackOverCap: a newcomer whose replica last saw room, on a
// gate another replica has filled, adds its lease in the admit transaction,
// finds the gate over its cap, takes the lease back and is refused; the
// holders are the one permit's, and once it is released the newcomer's
// replica admits.
func TestAdmitTakesBackOverCap(t *testing.T) {
	const gate = "connection:tb"
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{Recheck: time.Minute})
	a, b := reps[0], reps[1]
	req := admission.Request{Gates: path("global", gate), MaxWait: 10 * time.Second}
	p1, ok := a.TryAcquire(req)
	if !ok {
		t.Fatal("TryAcquire on a failed")
	}
	for range 3 {
		if _, ok := b.TryAcquire(req); ok {
			t.Fatal("admitted beyond the cap on another replica")
		}
		if n := zcard(t, a.rdb, a.keys.holders(gate)); n != 1 {
			t.Fatalf("holders = %d after a refused newcomer, want 1 (its lease taken back)", n)
		}
		b.mu.Lock()
		b.gates[gate].count = 0 // as if b had not seen a's permit: its next try runs the admit transaction again
		b.mu.Unlock()
	}
	p1.Release()
	p2, ok := b.TryAcquire(req)
	if !ok {
		t.Fatal("not admitted once the gate was free")
	}
	p2.Release()
	if n := zcard(t, a.rdb, a.keys.holders(gate)); n != 0 {
		t.Errorf("holders = %d at the end, want 0", n)
	}
}
