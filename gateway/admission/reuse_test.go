package admission

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A waiter, its class and its client's flow come from free lists and go back
// to them when the class empties, so a steady cycle of parking one request and
// admitting it allocates nothing once warm (white-box, like BenchmarkQueueCycle,
// but with the class and the flow emptied every time). Not parallel: the count
// of allocations is the whole process's.
func TestQueueCycleReusesWaiterClassAndFlow(t *testing.T) {
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:c1": 1})
	req := Prepare(Request{Gates: refs("connection:c1"), Client: "k"})
	held, ok := c.TryAcquire(req)
	if !ok {
		t.Fatal("holder not admitted")
	}
	var scratch Permit
	cycles := 0
	cycle := func() {
		c.mu.Lock()
		w, err := c.submit(context.Background(), &req, &scratch)
		c.mu.Unlock()
		if err != nil || w == nil {
			t.Fatalf("submit = %v, %v; want a parked waiter", w, err)
		}
		held.Release()
		c.mu.Lock()
		defer c.mu.Unlock()
		if w.state != stateAdmitted || c.waiters != 0 || len(c.classes) != 0 {
			t.Fatalf("after the release: waiter state %d, %d waiters, %d classes; want it admitted and nothing parked", w.state, c.waiters, len(c.classes))
		}
		*held = Permit{} // released: the admission lands in it
		c.collect(w, held)
		c.recycle(w)
		cycles++
	}
	if n := testing.AllocsPerRun(100, cycle); n != 0 {
		t.Errorf("parking and admitting one request allocates %v times per cycle, want 0 (waiter, class and flow reused)", n)
	}
	if cycles != 101 {
		t.Errorf("%d cycles ran, want 101", cycles)
	}
	held.Release()
}

// Reading the clock costs more than the rest of an immediate admission, so
// the first admission through a gate, then one in holdSampleEvery, measures
// its hold (a clock read when admitted and one when released); the others
// read no clock at all.
func TestImmediateAdmissionsReadTheClockOnlyToSampleTheirHold(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Unix(1000, 0)}
	reads := 0
	c := New(Options{Now: func() time.Time { reads++; return clk.now() }})
	c.SetCaps(map[string]int{"connection:c1": 4})
	var sampled []int
	for i := 1; i <= 2*holdSampleEvery+1; i++ {
		before := reads
		p := mustAcquire(t, c, "connection:c1")
		clk.advance(time.Second)
		p.Release()
		switch reads - before {
		case 0:
		case 2:
			sampled = append(sampled, i)
		default:
			t.Fatalf("admission %d and its release read the clock %d times, want 0 or 2", i, reads-before)
		}
	}
	if want := []int{1, holdSampleEvery + 1, 2*holdSampleEvery + 1}; !slices.Equal(sampled, want) {
		t.Errorf("admissions that measured their hold: %v, want %v", sampled, want)
	}
	if got := gateStat(t, c, "connection:c1").Admitted; got != 2*holdSampleEvery+1 {
		t.Errorf("admitted %d, want %d", got, 2*holdSampleEvery+1)
	}
}
