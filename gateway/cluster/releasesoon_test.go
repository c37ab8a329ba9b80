package cluster

import (
	"context"
	"sync"
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

// TestReleaseSoonGreedyAcrossReplicas: many requests at once on two
// replicas, giving their slots back with ReleaseSoon and Release in turn,
// some hanging up while they wait, never hold more than a gate's cap — on
// the connection's gate, on a model gate enclosed by it (no lease of its
// own) and on a model gate that binds below it.
func TestReleaseSoonGreedyAcrossReplicas(t *testing.T) {
	const conn, roomy, tight = "connection:greedy", "model:greedy:roomy", "model:greedy:tight"
	caps := map[string]int{conn: 3, roomy: 3, tight: 1}
	greedy(t, replicas(t, 2, caps, Options{}), caps, func(w int) []string {
		if w%3 == 0 {
			return []string{conn, tight}
		}
		return []string{conn, roomy}
	}, func(t *testing.T, i int, g admission.Grant) {
		if i%2 == 0 {
			soon(t, g)
		} else {
			g.Release()
		}
	})
}

// greedy runs 12 workers per replica of reps, 25 turns each, on the gates
// pathOf gives each worker (after "global"); every fifth turn hangs up while
// it may still wait, and giveBack returns each permit. Counted by the
// holders themselves (a permit counts from its admission until just before
// it is given back, and holds its slot for a round trip to Redis in
// between), no gate of caps holds more than its cap at once; every request
// ends admitted or hung up; no lease is left after Close.
func greedy(t *testing.T, reps []*Controller, caps map[string]int, pathOf func(w int) []string, giveBack func(t *testing.T, i int, g admission.Grant)) {
	t.Helper()
	const workers, turns = 12, 25
	var mu sync.Mutex
	held := map[string]int{}
	peak := map[string]int{}
	admitted, hungUp := 0, 0
	enter := func(gates []string) {
		mu.Lock()
		defer mu.Unlock()
		admitted++
		for _, g := range gates {
			held[g]++
			peak[g] = max(peak[g], held[g])
		}
	}
	leave := func(gates []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range gates {
			held[g]--
		}
	}
	var wg sync.WaitGroup
	for w := range len(reps) * workers {
		c := reps[w%len(reps)]
		gates := pathOf(w)
		req := admission.Request{Gates: path(append([]string{"global"}, gates...)...), MaxWait: time.Minute}
		wg.Go(func() {
			for i := range turns {
				ctx, cancel := context.WithCancel(t.Context())
				if i%5 == 4 {
					go cancel() // the client hangs up while it may still wait
				}
				g, err := c.Acquire(ctx, req)
				cancel()
				if err != nil {
					if ctx.Err() == nil || t.Context().Err() != nil {
						t.Errorf("acquire: %v", err)
						return
					}
					mu.Lock()
					hungUp++
					mu.Unlock()
					continue
				}
				enter(gates)
				// The request's work: a round trip to Redis, so that permits
				// overlap as long-running ones do.
				if err := c.rdb.Ping(t.Context()).Err(); err != nil {
					t.Error(err)
				}
				leave(gates)
				giveBack(t, i, g)
			}
		})
	}
	wg.Wait()
	for g, cp := range caps {
		if peak[g] > cp {
			t.Errorf("%s held %d at once, over its cap of %d", g, peak[g], cp)
		}
	}
	total := len(reps) * workers * turns
	if admitted+hungUp != total {
		t.Errorf("%d admitted + %d hung up, want %d requests", admitted, hungUp, total)
	}
	if admitted < total*4/5 {
		t.Errorf("%d admitted, want at least the %d requests that never hung up", admitted, total*4/5)
	}
	for _, c := range reps {
		if err := c.Close(context.WithoutCancel(t.Context())); err != nil {
			t.Fatal(err)
		}
	}
	for g := range caps {
		if n := zcard(t, reps[0].rdb, reps[0].keys.holders(g)); n != 0 {
			t.Errorf("%d leases left on %s after Close", n, g)
		}
	}
}
