package admission

import "testing"

// countingLedger is a Ledger of the test's own, not the in-process one (whose
// methods the controller calls directly): it counts the calls it gets.
type countingLedger struct {
	Ledger
	tryTakes, puts, inFlights int
}

func (l *countingLedger) TryTake(ids, caps []int) int {
	l.tryTakes++
	return l.Ledger.TryTake(ids, caps)
}

func (l *countingLedger) Put(ids []int) {
	l.puts++
	l.Ledger.Put(ids)
}

func (l *countingLedger) InFlight(id int) int {
	l.inFlights++
	return l.Ledger.InFlight(id)
}

// The Ledger given in Options keeps the counts (as cluster mode's does): every
// slot taken or returned, and every look at a gate's room (a release letting a
// waiter in, a wait estimate), goes through it, and the cap holds through it.
func TestOptionsLedgerKeepsTheCounts(t *testing.T) {
	t.Parallel()
	l := &countingLedger{Ledger: NewMemoryLedger()}
	c := New(Options{Ledger: l})
	c.SetCaps(map[string]int{"connection:c1": 1})
	req := Request{Gates: refs("connection:c1")}
	first := mustAcquire(t, c, "connection:c1")
	if _, ok := c.TryAcquire(req); ok {
		t.Fatal("a second request admitted past a cap of 1")
	}
	ch1 := acquireAsync(t.Context(), c, req)
	waitQueued(t, c, "connection:c1", 1)
	ch2 := acquireAsync(t.Context(), c, req)
	waitQueued(t, c, "connection:c1", 2)
	if got := c.EstimateWait(req); got <= 0 {
		t.Fatalf("EstimateWait on a full gate with two parked = %v, want > 0", got)
	}
	c.mu.Lock()
	takes, looks := l.tryTakes, l.inFlights
	c.mu.Unlock()
	if takes != 4 {
		t.Errorf("%d TryTake calls for an admission, a refusal and two parked requests, want 4", takes)
	}
	first.Release()
	r1 := recv(t, ch1)
	if r1.err != nil {
		t.Fatalf("first parked request: %v, want admitted when the slot is released", r1.err)
	}
	pending(t, ch2, "second parked request while the first holds the slot")
	c.mu.Lock()
	if l.tryTakes != takes+1 || l.puts != 1 || l.inFlights == looks {
		t.Errorf("after the release: %d TryTake, %d Put, InFlight read %t; want %d, 1, true (the gate's room asked of the ledger)", l.tryTakes, l.puts, l.inFlights > looks, takes+1)
	}
	c.mu.Unlock()
	r1.p.Release()
	r2 := recv(t, ch2)
	if r2.err != nil {
		t.Fatalf("second parked request: %v, want admitted when the slot is released", r2.err)
	}
	r2.p.Release()
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.puts != 3 || l.Ledger.InFlight(c.gates["connection:c1"].id) != 0 {
		t.Errorf("after every release: %d Put, %d in flight; want 3, 0", l.puts, l.Ledger.InFlight(c.gates["connection:c1"].id))
	}
}
