package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// soon gives g back without waiting, as the gateway does at the end of an
// attempt.
func soon(t *testing.T, g admission.Grant) {
	t.Helper()
	r, ok := g.(admission.SoonReleaser)
	if !ok {
		t.Fatalf("grant %T does not implement admission.SoonReleaser", g)
	}
	r.ReleaseSoon()
}

// TestReleaseSoonBeforeTheNextAdmit: a release queued with ReleaseSoon
// reaches Redis before any admit the same replica queues after it, so on a
// gate of cap 1 the request right behind (a session's next turn) is admitted
// at once, every time, without waiting for the release's reply.
func TestReleaseSoonBeforeTheNextAdmit(t *testing.T) {
	const gate = "model:c1:glm-5"
	c := replicas(t, 1, map[string]int{gate: 1}, Options{})[0]
	req := admission.Request{Gates: path("global", "connection:c1", gate)}
	g := mustTryAcquire(t, c, req)
	for i := range 300 {
		soon(t, g)
		var ok bool
		if g, ok = c.TryAcquire(req); !ok {
			t.Fatalf("turn %d: refused right after the previous turn's ReleaseSoon: the release went to Redis after the admit", i)
		}
	}
	soon(t, g)
	if err := c.Close(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	if n := zcard(t, c.rdb, c.keys.holders(gate)); n != 0 {
		t.Errorf("%d leases left on %s after Close: a queued release was lost", n, gate)
	}
}

// TestCloseWaitsForReleaseSoon: Close returns only once every release queued
// by ReleaseSoon is through, so no lease is left behind and no goroutine
// outlives the controller (goleak, TestMain).
func TestCloseWaitsForReleaseSoon(t *testing.T) {
	const gate = "connection:c1"
	c := replicas(t, 1, map[string]int{gate: 100}, Options{})[0]
	req := admission.Request{Gates: path("global", gate)}
	var held []admission.Grant
	for range 50 {
		held = append(held, mustTryAcquire(t, c, req))
	}
	for _, g := range held {
		soon(t, g)
		soon(t, g) // a second give-back is nothing, as with Release
	}
	if err := c.Close(context.WithoutCancel(t.Context())); err != nil {
		t.Fatal(err)
	}
	if n := zcard(t, c.rdb, c.keys.holders(gate)); n != 0 {
		t.Errorf("%d of 50 leases left on %s after Close", n, gate)
	}
	if lost := c.lostLeases; lost != 0 {
		t.Errorf("%d leases counted lost, want 0", lost)
	}
}

// TestReleaseSoonWakesAWaiterElsewhere: a slot given back with ReleaseSoon
// on one replica admits the request waiting for it on another.
func TestReleaseSoonWakesAWaiterElsewhere(t *testing.T) {
	const gate = "connection:c1"
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{})
	req := admission.Request{Gates: path("global", gate), MaxWait: 30 * time.Second}
	g := mustTryAcquire(t, reps[0], req)
	waiting := acquireAsync(t.Context(), reps[1], req)
	waitFor(t, 5*time.Second, "the waiter queued", func() bool { return zcard(t, reps[0].rdb, reps[0].keys.queue(gate)) == 1 })
	soon(t, g)
	r := recv(t, waiting, 10*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	soon(t, r.p)
}
