package admission

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// submitP sends one request of client (weight 1) and priority p on fairPath.
func (r *fairRig) submitP(client string, p Priority) *rigWaiter {
	r.t.Helper()
	return r.submitReq(Request{Gates: refs(fairPath...), Client: client, Weight: 1, Priority: p}, fairPath)
}

func TestPriorityNames(t *testing.T) {
	for _, p := range Priorities {
		got, ok := ParsePriority(p.String())
		if !ok || got != p {
			t.Errorf("ParsePriority(%q) = %v, %v", p.String(), got, ok)
		}
	}
	for _, s := range []string{"", "Interactive", "high", "low", " batch"} {
		if _, ok := ParsePriority(s); ok {
			t.Errorf("ParsePriority(%q) accepted", s)
		}
	}
	if Priority(0) != PriorityStandard || Priority(0).String() != "standard" {
		t.Error("the zero Priority is not standard")
	}
}

// TestPriorityInteractiveFirst: on a saturated cap-1 gate with 50 batch
// waiters, an interactive request that arrives last is admitted next, and
// a standard one after it, before any batch waiter; the batch waiters then
// go in arrival order. With the batch waiters of the interactive request's
// own key (a key that lowered some of its requests) the same holds.
func TestPriorityInteractiveFirst(t *testing.T) {
	for _, batchKey := range []string{"B", "I"} {
		t.Run("batch key "+batchKey, func(t *testing.T) {
			r := newFairRig(t, map[string]int{fairGate: 1})
			r.submit("holder", 1, fairPath...)
			var batch []*rigWaiter
			for range 50 {
				batch = append(batch, r.submitP(batchKey, PriorityBatch))
			}
			std := r.submitP("S", PriorityStandard)
			inter := r.submitP("I", PriorityInteractive)
			want := append([]*rigWaiter{inter, std}, batch...)
			for i, w := range want {
				got := r.releaseOldest()
				if len(got) != 1 || got[0] != w {
					t.Fatalf("admission %d: got %v, want %v", i, got, w)
				}
			}
			r.releaseAll()
		})
	}
}

// TestPriorityThroughAcquire is TestPriorityInteractiveFirst through the
// public API, one goroutine per request.
func TestPriorityThroughAcquire(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:p": 1})
	holder := mustAcquire(t, c, "connection:p")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var batch []<-chan result
	for i := range 50 {
		batch = append(batch, acquireAsync(ctx, c, Request{Gates: refs("connection:p"), Client: "B", Priority: PriorityBatch}))
		waitQueued(t, c, "connection:p", i+1)
	}
	inter := acquireAsync(ctx, c, Request{Gates: refs("connection:p"), Client: "I", Priority: PriorityInteractive})
	waitQueued(t, c, "connection:p", 51)
	if got := gateStat(t, c, "connection:p").QueuedByPriority; got[PriorityBatch] != 50 || got[PriorityInteractive] != 1 || len(got) != 2 {
		t.Errorf("QueuedByPriority = %v, want 50 batch and 1 interactive", got)
	}
	admittedInTurn(t, holder, inter, "interactive waiter", batch[0], "first batch waiter")
	for i, ch := range batch[1:] {
		r := recv(t, ch)
		if r.err != nil {
			t.Fatalf("batch waiter %d: %v", i+1, r.err)
		}
		r.p.Release()
	}
}

// TestPriorityAcrossGates: when one release frees two gates, a higher class
// parked on one goes before an earlier waiter of a lower class on the other.
func TestPriorityAcrossGates(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:g": 1, "model:g:f": 1})
	holder := mustAcquire(t, c, "connection:g", "model:g:f")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w1 := acquireAsync(ctx, c, Request{Gates: refs("model:g:f", "connection:g"), Priority: PriorityBatch})
	waitQueued(t, c, "model:g:f", 1)
	w2 := acquireAsync(ctx, c, Request{Gates: refs("connection:g"), Priority: PriorityInteractive})
	waitQueued(t, c, "connection:g", 1)
	admittedInTurn(t, holder, w2, "later interactive waiter", w1, "earlier batch waiter")
}

// TestPriorityAgingBound: interactive load keeps a cap-1 gate full (hold
// time H, a backlog of interactive waiters topped up after every
// admission). A batch waiter moves up to standard after priorityAgingMs and
// to interactive after twice that, and is then admitted at the gate's next
// admission: within 2 × aging + H of its arrival, and not before 2 × aging.
// A standard waiter likewise within aging + H. Time is the rig's fake
// clock: admissions are counted, not timed.
func TestPriorityAgingBound(t *testing.T) {
	const aging, hold = 10 * time.Second, time.Second
	for _, tc := range []struct {
		p     Priority
		steps int // aging periods to interactive
	}{{PriorityBatch, 2}, {PriorityStandard, 1}} {
		t.Run(tc.p.String(), func(t *testing.T) {
			r := newFairRig(t, map[string]int{fairGate: 1})
			r.c.SetPriorityAging(aging)
			r.submit("holder", 1, fairPath...)
			top := func() {
				for r.parkedOf("I") < 5 {
					r.submitP("I", PriorityInteractive)
				}
			}
			top()
			start := r.clk.now()
			low := []*rigWaiter{r.submitP("B", tc.p), r.submitP("B", tc.p), r.submitP("B2", tc.p)}
			r.clk.advance(hold / 2) // admissions come half a hold time off its arrival's rhythm
			bound := time.Duration(tc.steps)*aging + hold
			var admittedAt time.Duration
			for admittedAt == 0 {
				r.clk.advance(hold)
				for _, rw := range r.releaseOldest() {
					if rw.client != "I" && admittedAt == 0 {
						if rw != low[0] {
							t.Fatalf("first low waiter admitted is %s %d, want the earliest", rw.client, rw.seq)
						}
						admittedAt = r.clk.now().Sub(start)
					}
				}
				top()
				if r.clk.now().Sub(start) > 2*bound {
					t.Fatalf("%s waiter not admitted after %v", tc.p, r.clk.now().Sub(start))
				}
			}
			t.Logf("%s waiter admitted %v after it arrived (aging %v, hold %v, bound %v)", tc.p, admittedAt, aging, hold, bound)
			if admittedAt < time.Duration(tc.steps)*aging || admittedAt > bound {
				t.Errorf("%s waiter admitted after %v, want between %v and %v", tc.p, admittedAt, time.Duration(tc.steps)*aging, bound)
			}
			// The others of its arrival are interactive by now too: they
			// share the gate with the interactive key from here on.
			got := map[string]int{}
			for range 20 {
				r.clk.advance(hold)
				for _, rw := range r.releaseOldest() {
					got[rw.client]++
				}
				top()
			}
			if got["B"]+got["B2"] != 2 {
				t.Errorf("after the first: %v, want the 2 other aged waiters admitted", got)
			}
			r.releaseAll()
		})
	}
}

// TestPriorityDemotion: a class whose aged head is admitted goes back to the
// level its next head has earned: a young batch waiter does not ride on the
// aging of the one before it.
func TestPriorityDemotion(t *testing.T) {
	const aging = 10 * time.Second
	r := newFairRig(t, map[string]int{fairGate: 1})
	r.c.SetPriorityAging(aging)
	r.submit("holder", 1, fairPath...)
	old := r.submitP("B", PriorityBatch)
	r.clk.advance(2 * aging)
	young := r.submitP("B", PriorityBatch)
	std := r.submitP("S", PriorityStandard)
	for i, want := range []*rigWaiter{old, std, young} {
		got := r.releaseOldest()
		if len(got) != 1 || got[0] != want {
			t.Fatalf("admission %d: got %v, want %v", i, got, want)
		}
	}
	r.releaseAll()
}

// TestPriorityWeightsWithinClass: keys of weights 1 and 3, both backlogged
// in one class on a cap-4 gate, are admitted 1:3 (within 15 % over 200
// admissions), while a lower class waits behind them (no aging: the fake
// clock stands still), for each class.
func TestPriorityWeightsWithinClass(t *testing.T) {
	for _, p := range []Priority{PriorityInteractive, PriorityStandard} {
		t.Run(p.String(), func(t *testing.T) {
			r := newFairRig(t, map[string]int{fairGate: 4})
			for range 4 {
				r.submit("holder", 1, fairPath...)
			}
			for range 10 {
				r.submitReq(Request{Gates: refs(fairPath...), Client: "low", Priority: p + 1}, fairPath)
			}
			a := backlog{"A", 1, fairPath, 10}
			b := backlog{"B", 3, fairPath, 10}
			top := func() {
				for _, bl := range []backlog{a, b} {
					for r.parkedOf(bl.client) < bl.n {
						r.submitReq(Request{Gates: refs(fairPath...), Client: bl.client, Weight: bl.weight, Priority: p}, fairPath)
					}
				}
			}
			top()
			got := map[string]int{}
			for range 200 {
				for _, rw := range r.releaseOldest() {
					got[rw.client]++
				}
				top()
			}
			if got["low"] != 0 || got["A"]+got["B"] != 200 {
				t.Fatalf("admissions %v: the lower class got in", got)
			}
			if d := got["A"] - 50; d < -7 || d > 7 {
				t.Errorf("admissions %v, want A 50 ± 15 %%", got)
			}
			if d := got["B"] - 150; d < -22 || d > 22 {
				t.Errorf("admissions %v, want B 150 ± 15 %%", got)
			}
			r.releaseAll()
		})
	}
}

// TestPrioritySetAging: a shorter aging period applies to the waiters
// already parked.
func TestPrioritySetAging(t *testing.T) {
	r := newFairRig(t, map[string]int{fairGate: 1})
	r.submit("holder", 1, fairPath...)
	batch := r.submitP("B", PriorityBatch)
	r.clk.advance(3 * time.Second)
	inter := r.submitP("I", PriorityInteractive)
	r.c.SetPriorityAging(time.Second) // batch has waited three periods: interactive, and earlier
	got := r.releaseOldest()
	if len(got) != 1 || got[0] != batch {
		t.Fatalf("got %v, want the batch waiter aged by the new period", got)
	}
	if got := r.releaseOldest(); len(got) != 1 || got[0] != inter {
		t.Fatalf("got %v, want the interactive waiter", got)
	}
	r.releaseAll()
}

func (rw *rigWaiter) String() string {
	return fmt.Sprintf("%s/%s#%d", rw.client, rw.priority, rw.seq)
}

// TestPrioritySetAgingZeroMeansDefault: setting the aging period to 0 (or
// less) restores DefaultPriorityAging: a batch waiter that has waited three
// seconds has not aged, and the interactive waiter that came after it goes
// first.
func TestPrioritySetAgingZeroMeansDefault(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			r := newFairRig(t, map[string]int{fairGate: 1})
			r.c.SetPriorityAging(time.Second)
			r.c.SetPriorityAging(d)
			r.submit("holder", 1, fairPath...)
			r.submitP("B", PriorityBatch)
			r.clk.advance(3 * time.Second)
			inter := r.submitP("I", PriorityInteractive)
			if got := r.releaseOldest(); len(got) != 1 || got[0] != inter {
				t.Fatalf("got %v, want the interactive waiter (aging back to %v)", got, DefaultPriorityAging)
			}
			r.releaseAll()
		})
	}
}

// TestPriorityAgingCountsFromArrival: a waiter ages by the time it has
// waited, not by the controller's age: on a controller up for an hour, a
// batch waiter that just arrived is still batch, and an interactive waiter
// that arrives after it goes first.
func TestPriorityAgingCountsFromArrival(t *testing.T) {
	r := newFairRig(t, map[string]int{fairGate: 1})
	r.c.SetPriorityAging(10 * time.Second)
	r.clk.advance(time.Hour)
	r.submit("holder", 1, fairPath...)
	batch := r.submitP("B", PriorityBatch)
	inter := r.submitP("I", PriorityInteractive)
	if got := r.releaseOldest(); len(got) != 1 || got[0] != inter {
		t.Fatalf("got %v, want the interactive waiter before %v", got, batch)
	}
	r.releaseAll()
}

// TestPriorityAgesAtExactlyItsPeriod: a standard waiter that has waited
// exactly one aging period is interactive from that instant: it goes before
// an interactive waiter that arrives then.
func TestPriorityAgesAtExactlyItsPeriod(t *testing.T) {
	const aging = 10 * time.Second
	r := newFairRig(t, map[string]int{fairGate: 1})
	r.c.SetPriorityAging(aging)
	r.submit("holder", 1, fairPath...)
	std := r.submitP("S", PriorityStandard)
	r.clk.advance(aging)
	inter := r.submitP("I", PriorityInteractive)
	for i, want := range []*rigWaiter{std, inter} {
		if got := r.releaseOldest(); len(got) != 1 || got[0] != want {
			t.Fatalf("admission %d: got %v, want %v", i, got, want)
		}
	}
	r.releaseAll()
}
