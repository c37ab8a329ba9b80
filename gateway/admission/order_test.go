package admission

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFIFOPerGate(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:c1": 1})
	holder := mustAcquire(t, c, "connection:c1")
	var waiters []<-chan result
	for i := range 5 {
		waiters = append(waiters, acquireAsync(t.Context(), c, Request{Gates: refs("connection:c1")}))
		waitQueued(t, c, "connection:c1", i+1) // fixes the arrival order
	}
	holder.Release()
	for i, ch := range waiters {
		r := recv(t, ch)
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		for j, other := range waiters[i+1:] {
			pending(t, other, "later waiter "+string(rune('0'+i+1+j)))
		}
		r.p.Release()
	}
}

func TestNewcomerDoesNotOvertake(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:c1": 1, "model:c1:a": 1})
	holder := mustAcquire(t, c, "connection:c1", "model:c1:a")
	w := acquireAsync(t.Context(), c, Request{Gates: refs("connection:c1", "model:c1:a")})
	waitQueued(t, c, "connection:c1", 1)
	// The newcomer needs the same connection slot the waiter can use once
	// it frees: it must queue behind, not take it.
	if _, ok := c.TryAcquire(Request{Gates: refs("connection:c1", "model:c1:b")}); ok {
		t.Fatal("TryAcquire overtook an earlier waiter")
	}
	n := acquireAsync(t.Context(), c, Request{Gates: refs("connection:c1", "model:c1:b")})
	waitQueued(t, c, "connection:c1", 2)
	admittedInTurn(t, holder, w, "earlier waiter", n, "newcomer")
}

// A waiter parked on a full G1 whose path also includes G2 cannot use G2's
// last slot now, so a newcomer needing only G2 takes it.
func TestNewcomerTakesSlotWaiterCannotUse(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"model:c1:a": 1, "connection:c1": 1})
	holder := mustAcquire(t, c, "model:c1:a")
	ctx, cancel := context.WithCancel(t.Context())
	w := acquireAsync(ctx, c, Request{Gates: refs("connection:c1", "model:c1:a")})
	waitQueued(t, c, "model:c1:a", 1)
	p := mustAcquire(t, c, "connection:c1", "model:c1:b")
	// The connection is now full too: release the model holder and the
	// waiter moves onto the connection gate, keeping its place.
	holder.Release()
	waitQueued(t, c, "connection:c1", 1)
	p.Release()
	r := recv(t, w)
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	r.p.Release()
	cancel()
}

func TestLiveCaps(t *testing.T) {
	t.Parallel()
	path := refs("connection:c1", "model:c1:m")
	t.Run("raise admits at once", func(t *testing.T) {
		t.Parallel()
		c := New(Options{})
		c.SetCaps(map[string]int{"model:c1:m": 1})
		holder := mustAcquire(t, c, "connection:c1", "model:c1:m")
		w1 := acquireAsync(t.Context(), c, Request{Gates: path})
		w2 := acquireAsync(t.Context(), c, Request{Gates: path})
		waitQueued(t, c, "model:c1:m", 2)
		c.SetCaps(map[string]int{"model:c1:m": 3})
		recv(t, w1).p.Release()
		recv(t, w2).p.Release()
		holder.Release()
	})
	t.Run("lower admits nobody until below", func(t *testing.T) {
		t.Parallel()
		c := New(Options{})
		c.SetCaps(map[string]int{"model:c1:m": 3})
		h := []*Permit{mustAcquire(t, c, "connection:c1", "model:c1:m"), mustAcquire(t, c, "connection:c1", "model:c1:m"), mustAcquire(t, c, "connection:c1", "model:c1:m")}
		c.SetCaps(map[string]int{"model:c1:m": 1})
		if s := gateStat(t, c, "model:c1:m"); s.InFlight != 3 || s.Cap != 1 {
			t.Fatalf("after lowering: in flight %d cap %d, want 3 (nobody cut) and 1", s.InFlight, s.Cap)
		}
		w := acquireAsync(t.Context(), c, Request{Gates: path})
		waitQueued(t, c, "model:c1:m", 1)
		h[0].Release()
		h[1].Release()
		if s := gateStat(t, c, "model:c1:m"); s.InFlight != 1 || s.Queued != 1 {
			t.Fatalf("in flight %d queued %d, want 1 and 1 (not yet below the cap)", s.InFlight, s.Queued)
		}
		pending(t, w, "waiter")
		h[2].Release()
		recv(t, w).p.Release()
	})
	t.Run("remove lets waiters proceed", func(t *testing.T) {
		t.Parallel()
		c := New(Options{})
		c.SetCaps(map[string]int{"model:c1:m": 1})
		holder := mustAcquire(t, c, "connection:c1", "model:c1:m")
		w1 := acquireAsync(t.Context(), c, Request{Gates: path})
		w2 := acquireAsync(t.Context(), c, Request{Gates: path})
		waitQueued(t, c, "model:c1:m", 2)
		c.SetCaps(map[string]int{})
		recv(t, w1).p.Release()
		recv(t, w2).p.Release()
		holder.Release()
		if s := gateStat(t, c, "model:c1:m"); s.InFlight != 0 {
			t.Fatalf("in flight %d, want 0", s.InFlight)
		}
	})
}

func TestMovedWaiterKeepsStartAndPlace(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Unix(1000, 0)}
	c := New(Options{Now: clk.now})
	c.SetCaps(map[string]int{"connection:c1": 1, "model:c1:a": 1})
	c.mu.Lock()
	defer c.mu.Unlock()
	var hm, hc Permit
	mustSubmit(t, c, Request{Gates: refs("model:c1:a")}, &hm)
	mustSubmit(t, c, Request{Gates: refs("connection:c1")}, &hc)
	// w parks on the connection (first full gate of its path); y arrives
	// later and parks on the model gate.
	var pw, py Permit
	w := mustPark(t, c, Request{Gates: refs("connection:c1", "model:c1:a"), MaxWait: 100 * time.Millisecond}, &pw)
	clk.advance(60 * time.Millisecond)
	y := mustPark(t, c, Request{Gates: refs("model:c1:a")}, &py)
	if w.cls.on.key != "connection:c1" || y.cls.on.key != "model:c1:a" {
		t.Fatalf("parked on %s and %s, want connection:c1 and model:c1:a", w.cls.on.key, y.cls.on.key)
	}
	wantStart, wantSeq := w.start, w.seq
	c.release(hc.gates[:hc.n], hc.start, hc.measured) // the connection frees; the model is still full
	if w.cls == nil || w.cls.on.key != "model:c1:a" {
		t.Fatalf("w not moved onto model:c1:a")
	}
	if !w.start.Equal(wantStart) || w.seq != wantSeq {
		t.Fatalf("moved waiter start %v seq %d, want %v and %d", w.start, w.seq, wantStart, wantSeq)
	}
	if head := c.next(w.cls.on, c.clock()).head; head != w {
		t.Fatalf("moved waiter is not ahead of the later arrival y")
	}
	c.release(hm.gates[:hm.n], hm.start, hm.measured)
	if w.state != stateAdmitted || y.state != stateWaiting {
		t.Fatalf("states w=%d y=%d, want w admitted before y", w.state, y.state)
	}
	clk.advance(40 * time.Millisecond)
	c.collect(w, &pw)
	if pw.Waited() != 60*time.Millisecond {
		t.Errorf("waited %v, want 60ms", pw.Waited())
	}
	if err := c.abandon(y, context.Canceled); !errors.Is(err, context.Canceled) {
		t.Errorf("abandon = %v", err)
	}
}

// When one release frees slots in several gates, the earliest waiter across
// all of them goes first, not whichever gate happens to be looked at first.
func TestReleaseAdmitsEarliestAcrossGates(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:g": 1, "model:g:f": 1})
	holder := mustAcquire(t, c, "connection:g", "model:g:f")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w1 := acquireAsync(ctx, c, Request{Gates: refs("model:g:f", "connection:g")})
	waitQueued(t, c, "model:g:f", 1)
	w2 := acquireAsync(ctx, c, Request{Gates: refs("connection:g")})
	waitQueued(t, c, "connection:g", 1)
	admittedInTurn(t, holder, w1, "earliest waiter", w2, "later waiter")
}

// admittedInTurn releases holder and checks that first is admitted while second
// still waits, then that second is admitted once first releases.
func admittedInTurn(t *testing.T, holder *Permit, first <-chan result, firstName string, second <-chan result, secondName string) {
	t.Helper()
	holder.Release()
	r := recv(t, first)
	if r.err != nil {
		t.Fatalf("%s: %v", firstName, r.err)
	}
	pending(t, second, secondName)
	r.p.Release()
	r = recv(t, second)
	if r.err != nil {
		t.Fatalf("%s: %v", secondName, r.err)
	}
	r.p.Release()
}
