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
// slot taken, returned or looked at when a release lets a waiter in goes
// through it, and the cap holds through it.
func TestOptionsLedgerKeepsTheCounts(t *testing.T) {
	t.Parallel()
	l := &countingLedger{Ledger: NewMemoryLedger()}
	c := New(Options{Ledger: l})
	c.SetCaps(map[string]int{"connection:c1": 1})
	first := mustAcquire(t, c, "connection:c1")
	if _, ok := c.TryAcquire(Request{Gates: refs("connection:c1")}); ok {
		t.Fatal("a second request admitted past a cap of 1")
	}
	ch := acquireAsync(t.Context(), c, Request{Gates: refs("connection:c1")})
	waitQueued(t, c, "connection:c1", 1)
	c.mu.Lock()
	takes, looks := l.tryTakes, l.inFlights
	c.mu.Unlock()
	if takes != 3 {
		t.Errorf("%d TryTake calls for an admission, a refusal and a parked request, want 3", takes)
	}
	first.Release()
	r := recv(t, ch)
	if r.err != nil {
		t.Fatalf("parked request: %v, want admitted when the slot is released", r.err)
	}
	c.mu.Lock()
	if l.tryTakes != takes+1 || l.puts != 1 || l.inFlights == looks {
		t.Errorf("after the release: %d TryTake, %d Put, InFlight read %t; want %d, 1, true (the gate's room asked of the ledger)", l.tryTakes, l.puts, l.inFlights > looks, takes+1)
	}
	c.mu.Unlock()
	r.p.Release()
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.puts != 2 || l.Ledger.InFlight(c.gates["connection:c1"].id) != 0 {
		t.Errorf("after both releases: %d Put, %d in flight; want 2, 0", l.puts, l.Ledger.InFlight(c.gates["connection:c1"].id))
	}
}
