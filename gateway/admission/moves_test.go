package admission

import (
	"fmt"
	"testing"
)

// TestReleaseMovesBounded counts the work of one release in the scenario of
// issue 17: n requests parked on the global gate behind a full connection
// gate. Releasing the global slot used to move all n onto the connection
// inside one call; now their class moves as one, so the count of moves per
// release is the same constant for 10 and for 100 000 parked waiters, in both
// directions (global → connection, then connection → global), and nobody is
// admitted early or lost.
func TestReleaseMovesBounded(t *testing.T) {
	t.Parallel()
	for _, n := range []int{10, 100000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			c, hg, hc, parked := parkBehind(t, n)
			global, conn := Request{Gates: refs("global")}, Request{Gates: refs("connection:busy")}
			release := func(p *Permit, take Request) (*Permit, uint64) {
				t.Helper()
				c.mu.Lock()
				before := c.moves
				c.mu.Unlock()
				p.Release()
				c.mu.Lock()
				moved := c.moves - before
				if err := checkInvariants(c); err != nil {
					t.Fatal(err)
				}
				c.mu.Unlock()
				q, ok := c.TryAcquire(take)
				if !ok {
					t.Fatalf("slot of %v not taken back: a waiter took it or it was kept", take.Gates)
				}
				return q, moved
			}
			for range 3 {
				var moved uint64
				if hg, moved = release(hg, global); moved != 1 {
					t.Fatalf("global release moved %d classes, want 1", moved)
				}
				if parked[n-1].cls.on.key != "connection:busy" {
					t.Fatalf("waiters parked on %s, want connection:busy", parked[n-1].cls.on.key)
				}
				if hc, moved = release(hc, conn); moved != 1 {
					t.Fatalf("connection release moved %d classes, want 1", moved)
				}
				if parked[0].cls.on.key != "global" {
					t.Fatalf("waiters parked on %s, want global", parked[0].cls.on.key)
				}
			}
			// Both free at once: the waiters are admitted in arrival order,
			// one per release.
			hg.Release()
			hc.Release()
			c.mu.Lock()
			defer c.mu.Unlock()
			if parked[0].state != stateAdmitted || (n > 1 && parked[1].state != stateWaiting) {
				t.Fatalf("first waiter state %d, second %d; want the first admitted only", parked[0].state, parked[1].state)
			}
			// The rest stay parked, as one class, on the connection (full again).
			if s := c.stats(c.gates["connection:busy"]); s.Queued != n-1 || s.Waiting != n-1 {
				t.Fatalf("connection queued %d waiting %d, want %d", s.Queued, s.Waiting, n-1)
			}
			if err := checkInvariants(c); err != nil {
				t.Fatal(err)
			}
		})
	}
}
