package admission

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// TestFairShareWeights: keys of weights 1 and 3, both backlogged on a cap-4
// gate with equal holds, are admitted 1:3 (within 15% over 200 admissions).
func TestFairShareWeights(t *testing.T) {
	r := newFairRig(t, map[string]int{"global": 100, fairGate: 4})
	for range 4 { // the gate starts full, held by requests of neither key
		r.submit("other", 1, fairPath...)
	}
	got := r.runBacklogged(200,
		backlog{"A", 1, fairPath, 30},
		backlog{"B", 3, fairPath, 30})
	t.Logf("fair share 1:3 on a cap-4 gate, 200 admissions: A %d, B %d (B/A %.2f)", got["A"], got["B"], float64(got["B"])/float64(got["A"]))
	if got["A"]+got["B"] != 200 {
		t.Fatalf("admissions %v, want 200 in all", got)
	}
	if ratio := float64(got["B"]) / float64(got["A"]); ratio < 3*0.85 || ratio > 3*1.15 {
		t.Errorf("B/A = %.2f (%v), want 3 ± 15%%", ratio, got)
	}
	r.releaseAll()
}

// TestFairShareThreeKeys: three backlogged keys of weights 1, 2 and 5 share
// the gate by weight.
func TestFairShareThreeKeys(t *testing.T) {
	r := newFairRig(t, map[string]int{fairGate: 2})
	got := r.runBacklogged(800,
		backlog{"A", 1, fairPath, 10},
		backlog{"B", 2, fairPath, 10},
		backlog{"C", 5, fairPath, 10})
	t.Logf("weights 1:2:5, 800 admissions: %v", got)
	for client, w := range map[string]int{"A": 1, "B": 2, "C": 5} {
		want := 800 * w / 8
		if d := got[client] - want; d < -2 || d > 2 {
			t.Errorf("client %s admitted %d, want %d ± 2 (%v)", client, got[client], want, got)
		}
	}
	r.releaseAll()
}

// TestFairFIFOWithinKey: a key's waiters are admitted in arrival order, on
// one path and across its paths through the same gate, while another key
// takes its share.
func TestFairFIFOWithinKey(t *testing.T) {
	r := newFairRig(t, map[string]int{"connection:c": 1})
	x := []string{"connection:c", "model:c:x"}
	y := []string{"connection:c", "model:c:y"}
	r.submit("B", 1, x...) // holds the connection
	for i := range 30 {
		r.submit("A", 1, [][]string{x, y}[i%3%2]...)
		r.submit("B", 2, y...)
	}
	r.releaseAll()
	var last uint64
	n := 0
	for _, rw := range r.order {
		if rw.client != "A" {
			continue
		}
		if rw.seq < last {
			t.Fatalf("A's waiter %d admitted after %d", rw.seq, last)
		}
		last = rw.seq
		n++
	}
	if n != 30 {
		t.Fatalf("A admitted %d times, want 30", n)
	}
}

// TestFairNewcomerBound: a request of a key with no waiters, arriving where
// other keys have a backlog on a cap-1 gate, is admitted within the next
// ⌈total weight of the waiting keys ÷ its weight⌉ + 1 admissions of that
// gate (DESIGN.md, "Fair share"), however long the backlog and whenever it
// arrives.
func TestFairNewcomerBound(t *testing.T) {
	cases := []struct {
		name    string
		waiting []backlog
		weight  int
	}{
		{"A has 100, C weight 1", []backlog{{"A", 1, fairPath, 100}}, 1},
		{"A weight 5 has 100, C weight 1", []backlog{{"A", 5, fairPath, 100}}, 1},
		{"A 1 and B 3 have 100 each, C weight 1", []backlog{{"A", 1, fairPath, 100}, {"B", 3, fairPath, 100}}, 1},
		{"A 1 and B 3 have 100 each, C weight 3", []backlog{{"A", 1, fairPath, 100}, {"B", 3, fairPath, 100}}, 3},
		{"five keys of weight 1, C weight 5", []backlog{
			{"A", 1, fairPath, 20}, {"B", 1, fairPath, 20}, {"D", 1, fairPath, 20}, {"E", 1, fairPath, 20}, {"F", 1, fairPath, 20}}, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			total := 0
			for _, b := range tc.waiting {
				total += b.weight
			}
			bound := (total+tc.weight-1)/tc.weight + 1
			worst := 0
			// C arrives after each of the first 12 admissions in turn: the
			// bound holds wherever the backlogged keys are in their turns.
			for warm := range 12 {
				r := newFairRig(t, map[string]int{fairGate: 1})
				r.submit("holder", 1, fairPath...)
				r.runBacklogged(warm, tc.waiting...)
				c := r.submit("C", tc.weight, fairPath...)
				n := r.admissionsUntil(c, tc.waiting...)
				worst = max(worst, n)
				if n > bound {
					t.Errorf("after %d admissions: C admitted at the %d-th admission, bound %d", warm, n, bound)
				}
				r.releaseAll()
			}
			t.Logf("%s: C admitted within %d admissions (bound %d)", tc.name, worst, bound)
		})
	}
}

// TestFairIdleKeyEarnsNoCredit: a key that waited for nothing while others
// were served starts at the gate's virtual time, so it gets its share from
// its arrival on and no burst for the time it was idle; and a key whose
// waiters all left keeps the end of its last turn, so it cannot skip turns
// by coming and going.
func TestFairIdleKeyEarnsNoCredit(t *testing.T) {
	r := newFairRig(t, map[string]int{fairGate: 1})
	r.submit("holder", 1, fairPath...)
	a, b := backlog{"A", 1, fairPath, 10}, backlog{"B", 1, fairPath, 10}
	r.runBacklogged(100, a, b)
	got := r.runBacklogged(60, a, b, backlog{"C", 1, fairPath, 40})
	t.Logf("C joins A and B (weights 1:1:1) after 100 admissions, next 60: %v", got)
	if got["C"] > 21 {
		t.Errorf("idle key C got %d of 60 admissions, want its share 20 (± 1)", got["C"])
	}
	r.releaseAll()

	// C comes and goes: one waiter at a time, sent again as soon as the last
	// was admitted, so it leaves the queue every time. Against A of weight
	// 3 it still gets a quarter.
	r = newFairRig(t, map[string]int{fairGate: 1})
	r.submit("holder", 1, fairPath...)
	got = r.runBacklogged(200, backlog{"A", 3, fairPath, 10}, backlog{"C", 1, fairPath, 1})
	t.Logf("C with one waiter at a time against A of weight 3, 200 admissions: %v", got)
	if got["C"] < 48 || got["C"] > 52 {
		t.Errorf("C got %d of 200, want 50 ± 2", got["C"])
	}
	r.releaseAll()
}

// TestFairTwoPathsShareKeyWeight: a key with waiters on two paths through
// the same full gate has its one weight there, not one per path.
func TestFairTwoPathsShareKeyWeight(t *testing.T) {
	x := []string{"connection:c", "model:c:x"}
	y := []string{"connection:c", "model:c:y"}
	r := newFairRig(t, map[string]int{"connection:c": 2})
	r.submit("holder", 1, x...)
	r.submit("holder", 1, y...)
	top := func() {
		for r.parkedOf("A") < 20 {
			r.submit("A", 1, [][]string{x, y}[r.parkedOf("A")%2]...)
		}
		for r.parkedOf("B") < 10 {
			r.submit("B", 1, x...)
		}
	}
	top()
	count := map[string]int{}
	for range 300 {
		for _, rw := range r.releaseOldest() {
			count[rw.client]++
		}
		top()
	}
	t.Logf("A on two paths vs B on one, equal weights, 300 admissions: %v", count)
	if d := count["A"] - count["B"]; d < -2 || d > 2 {
		t.Errorf("A %d vs B %d: a key's two paths must share its weight", count["A"], count["B"])
	}
	r.releaseAll()
}

// TestFairHeadLeaves: a class head that times out or is cancelled hands its
// key's turn to the key's next waiter; a key whose only waiter leaves gets
// the same turn back when it returns; shares are unchanged.
func TestFairHeadLeaves(t *testing.T) {
	r := newFairRig(t, map[string]int{fairGate: 1})
	r.submit("holder", 1, fairPath...)
	a, b := backlog{"A", 1, fairPath, 10}, backlog{"B", 1, fairPath, 10}
	r.runBacklogged(7, a, b)
	g := r.c.gates[fairGate]
	tagOf := func(client string) uint64 {
		r.c.mu.Lock()
		defer r.c.mu.Unlock()
		f := g.queue.lv[1].flows[client]
		if f == nil {
			t.Fatalf("no flow of %s", client)
		}
		return f.tag
	}
	before := tagOf("A")
	// Cancel A's head, time out its next one: A keeps its turn.
	var heads []*rigWaiter
	for _, rw := range r.waiting {
		if rw.client == "A" && len(heads) < 2 {
			heads = append(heads, rw)
		}
	}
	r.cancel(heads[0], context.Canceled)
	r.cancel(heads[1], nil)
	if got := tagOf("A"); got != before {
		t.Errorf("A's tag moved from %d to %d when its heads left", before, got)
	}
	got := r.runBacklogged(100, a, b)
	if got["A"] != 50 || got["B"] != 50 {
		t.Errorf("after A's heads left: %v, want 50:50", got)
	}
	// Every waiter of A leaves: A's turn is kept, and it starts there again.
	before = tagOf("A")
	for _, rw := range append([]*rigWaiter(nil), r.waiting...) {
		if rw.client == "A" {
			r.cancel(rw, context.Canceled)
		}
	}
	r.c.mu.Lock()
	kept, ok := g.queue.lv[1].fin["A"]
	vt := g.queue.lv[1].vt
	r.c.mu.Unlock()
	if before > vt && (!ok || kept != before) || before <= vt && ok {
		t.Errorf("A left with tag %d (vt %d): kept %d, %v", before, vt, kept, ok)
	}
	r.submit("A", 1, fairPath...)
	if got := tagOf("A"); got != max(before, vt) {
		t.Errorf("A came back at tag %d, want %d", got, max(before, vt))
	}
	r.releaseAll()
	r.c.mu.Lock()
	if g.queue.lv[1].vt != 0 || len(g.queue.lv[1].fin) != 0 || len(g.queue.lv[1].flows) != 0 {
		t.Errorf("empty queue keeps vt %d, turns %v, flows %d", g.queue.lv[1].vt, g.queue.lv[1].fin, len(g.queue.lv[1].flows))
	}
	r.c.mu.Unlock()
}

// TestFairLiveCaps: raising a cap admits waiters at once in fair order,
// lowering it admits nobody until in-flight is below it, removing it admits
// everybody.
func TestFairLiveCaps(t *testing.T) {
	r := newFairRig(t, map[string]int{fairGate: 1})
	r.submit("holder", 1, fairPath...)
	for range 10 {
		r.submit("A", 1, fairPath...)
		r.submit("B", 3, fairPath...)
	}
	r.c.SetCaps(map[string]int{fairGate: 5})
	adm := r.collect()
	count := map[string]int{}
	for _, rw := range adm {
		count[rw.client]++
	}
	if len(adm) != 4 || count["B"] != 3 {
		t.Errorf("raise to 5 admitted %v, want 4: 3 of B, 1 of A", count)
	}
	r.c.SetCaps(map[string]int{fairGate: 2})
	for range 3 {
		if adm := r.releaseOldest(); len(adm) != 0 {
			t.Fatalf("admitted %d while in flight is at or above the lowered cap", len(adm))
		}
	}
	if adm := r.releaseOldest(); len(adm) != 1 {
		t.Fatalf("admitted %d once in flight fell below the cap, want 1", len(adm))
	}
	if gs := gateStat(t, r.c, fairGate); gs.QueuedByClient["A"]+gs.QueuedByClient["B"] != gs.Queued || gs.Queued != 15 {
		t.Errorf("stats: queued %d, by client %v", gs.Queued, gs.QueuedByClient)
	}
	r.c.SetCaps(map[string]int{})
	if adm := r.collect(); len(adm) != 15 {
		t.Errorf("removing the cap admitted %d, want 15", len(adm))
	}
	r.releaseAll()
	if gs := gateStat(t, r.c, "connection:c"); gs.QueuedByClient != nil {
		t.Errorf("QueuedByClient %v with nobody queued", gs.QueuedByClient)
	}
}

// TestFairMovedClass: a class moved to another gate joins its key's flow
// there in its arrival place (FIFO within the key holds across the move),
// or starts a flow as a newcomer would.
func TestFairMovedClass(t *testing.T) {
	r := newFairRig(t, map[string]int{"connection:c": 1, "model:c:x": 1})
	x := []string{"connection:c", "model:c:x"}
	r.submit("H", 1, "connection:c") // holds the connection
	r.submit("H", 1, "model:c:x")    // holds the model
	for range 3 {
		r.submit("A", 1, x...) // parked on the connection, the first full gate
	}
	for range 3 {
		r.submit("A", 1, "model:c:x") // parked on the model, arrived later
	}
	for range 3 {
		r.submit("B", 1, x...)
	}
	if adm := r.releaseOldest(); len(adm) != 0 {
		t.Fatalf("the connection's release admitted %d, want 0: the model is full", len(adm))
	}
	if r.c.moves != 2 {
		t.Errorf("%d moves, want 2 (A's class and B's)", r.c.moves)
	}
	gs := gateStat(t, r.c, "model:c:x")
	if gs.Queued != 9 || gs.QueuedByClient["A"] != 6 || gs.QueuedByClient["B"] != 3 {
		t.Fatalf("model gate: queued %d, by client %v", gs.Queued, gs.QueuedByClient)
	}
	r.releaseAll()
	var last uint64
	var order []string
	for _, rw := range r.order {
		order = append(order, fmt.Sprintf("%s%d", rw.client, rw.seq))
		if rw.client == "A" {
			if rw.seq < last {
				t.Errorf("A out of arrival order: %d after %d", rw.seq, last)
			}
			last = rw.seq
		}
	}
	// Equal weights alternate A and B once both wait on the model gate; within
	// A, its moved class (arrivals 1–3) keeps its place before the class that
	// was parked there first but arrived later (4–6).
	if want := []string{"A1", "B7", "A2", "B8", "A3", "B9", "A4", "A5", "A6"}; !slices.Equal(order, want) {
		t.Errorf("admission order %v, want %v", order, want)
	}
}

// TestReleaseAdmitsTheEarlierWaiterAcrossGates: a release that frees two gates
// at once admits the earlier of the waiters parked on them first (same
// priority): here the later one would need the gate the earlier one takes, so
// it moves on to wait there.
func TestReleaseAdmitsTheEarlierWaiterAcrossGates(t *testing.T) {
	r := newFairRig(t, map[string]int{"connection:c1": 1, "model:c1:a": 1})
	r.submit("h", 1, "connection:c1", "model:c1:a")
	first := r.submit("x", 1, "connection:c1")
	later := r.submit("y", 1, "model:c1:a", "connection:c1")
	if got := r.releaseOldest(); len(got) != 1 || got[0] != first {
		t.Fatalf("admitted %v, want only the earlier waiter %v (not %v)", got, first, later)
	}
	r.releaseAll()
}
