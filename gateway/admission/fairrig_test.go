package admission

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fairRig drives a controller deterministically, without goroutines (as the
// fuzz target does): requests are submitted under the mutex, permits are
// released one at a time, and every admission a release causes is recorded
// in order, with the client it went to.
type fairRig struct {
	t       *testing.T
	c       *Controller
	clk     *fakeClock
	waiting []*rigWaiter // parked, in submission order
	held    []*rigWaiter // admitted and not yet released, oldest first
	order   []*rigWaiter // every admission from a queue, in order
}

type rigWaiter struct {
	client   string
	weight   int
	priority Priority
	keys     []string
	w        *waiter // nil once admitted
	p        *Permit
	seq      uint64 // arrival number; 0 when admitted at once
}

func newFairRig(t *testing.T, caps map[string]int) *fairRig {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	c := New(Options{Now: clk.now})
	c.SetCaps(caps)
	return &fairRig{t: t, c: c, clk: clk}
}

// submit sends one request of client (weight) on the path keys: admitted at
// once (held) or parked.
func (r *fairRig) submit(client string, weight int, keys ...string) *rigWaiter {
	r.t.Helper()
	return r.submitReq(Request{Gates: refs(keys...), Client: client, Weight: weight}, keys)
}

func (r *fairRig) submitReq(req Request, keys []string) *rigWaiter {
	r.t.Helper()
	rw := &rigWaiter{client: req.Client, weight: req.Weight, priority: req.Priority, keys: keys, p: &Permit{}}
	r.c.mu.Lock()
	w, err := r.c.submit(context.Background(), &req, rw.p)
	if err == nil {
		err = checkInvariants(r.c)
	}
	r.c.mu.Unlock()
	if err != nil {
		r.t.Fatalf("submit %s %v: %v", req.Client, keys, err)
	}
	if w == nil {
		r.held = append(r.held, rw)
	} else {
		rw.w, rw.seq = w, w.seq
		r.waiting = append(r.waiting, rw)
	}
	return rw
}

// collect moves the waiters admitted since the last call to held and order.
func (r *fairRig) collect() []*rigWaiter {
	r.t.Helper()
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	var admitted []*rigWaiter
	kept := r.waiting[:0]
	for _, rw := range r.waiting {
		if rw.w.state != stateAdmitted {
			kept = append(kept, rw)
			continue
		}
		r.c.collect(rw.w, rw.p)
		r.c.recycle(rw.w)
		rw.w = nil
		admitted = append(admitted, rw)
	}
	r.waiting = kept
	r.held = append(r.held, admitted...)
	r.order = append(r.order, admitted...)
	if err := checkInvariants(r.c); err != nil {
		r.t.Fatal(err)
	}
	return admitted
}

// releaseOldest releases the permit held longest (equal hold times) and
// returns the waiters that release admitted.
func (r *fairRig) releaseOldest() []*rigWaiter {
	r.t.Helper()
	if len(r.held) == 0 {
		r.t.Fatal("nothing held")
	}
	rw := r.held[0]
	r.held = r.held[1:]
	rw.p.Release()
	return r.collect()
}

// cancel abandons a parked waiter with a cancel (cause) or a timeout (nil).
func (r *fairRig) cancel(rw *rigWaiter, cause error) {
	r.t.Helper()
	r.c.mu.Lock()
	err := r.c.abandon(rw.w, cause)
	if cause != nil && !errors.Is(err, cause) || cause == nil && !errors.Is(err, ErrTimeout) {
		r.t.Errorf("abandon: %v", err)
	}
	r.c.recycle(rw.w)
	rw.w = nil
	err = checkInvariants(r.c)
	r.c.mu.Unlock()
	if err != nil {
		r.t.Fatal(err)
	}
	for i, x := range r.waiting {
		if x == rw {
			r.waiting = append(r.waiting[:i], r.waiting[i+1:]...)
			break
		}
	}
}

func (r *fairRig) parkedOf(client string) int {
	n := 0
	for _, rw := range r.waiting {
		if rw.client == client {
			n++
		}
	}
	return n
}

// releaseAll releases every permit, admitting and releasing whoever waits.
func (r *fairRig) releaseAll() {
	for len(r.held) > 0 {
		r.releaseOldest()
	}
	if len(r.waiting) != 0 {
		r.t.Fatalf("%d waiters left with nothing held", len(r.waiting))
	}
}

const fairGate = "model:c:m"

var fairPath = []string{"global", "connection:c", fairGate}

// backlog keeps client's parked requests at n by topping up after every
// admission, as a client with n workers in a loop would.
type backlog struct {
	client string
	weight int
	keys   []string
	n      int
}

// runBacklogged releases the oldest permit steps times, topping every
// backlog up after each admission, and counts the admissions by client.
func (r *fairRig) runBacklogged(steps int, logs ...backlog) map[string]int {
	r.t.Helper()
	top := func() {
		for _, b := range logs {
			for r.parkedOf(b.client) < b.n {
				r.submit(b.client, b.weight, b.keys...)
			}
		}
	}
	top()
	got := make(map[string]int)
	for range steps {
		for _, rw := range r.releaseOldest() {
			got[rw.client]++
		}
		top()
	}
	return got
}

// admissionsUntil releases oldest permits, topping the backlogs up, until w
// is admitted, and returns how many admissions that took (w's included).
func (r *fairRig) admissionsUntil(w *rigWaiter, logs ...backlog) int {
	r.t.Helper()
	n := 0
	for w.w != nil {
		adm := r.releaseOldest()
		n += len(adm)
		for _, b := range logs {
			for r.parkedOf(b.client) < b.n {
				r.submit(b.client, b.weight, b.keys...)
			}
		}
		if n > 10000 {
			r.t.Fatal("never admitted")
		}
	}
	return n
}
