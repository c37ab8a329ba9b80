package cluster

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// TestTimeoutNewcomerBound (issue 23, item 4): on a cap-1 gate held by one
// request, key A has 100 waiters over two replicas; key C queues 20 waiters
// that all time out; then C sends one request. The waiters that left gave
// C's turn back, so C's request is admitted within ⌈1 ÷ 1⌉ + 1 = 2
// admissions of the gate, as a newcomer's is (before the fix: 21st).
// Counted, not timed: the gate stays held while C's waiters time out.
func TestTimeoutNewcomerBound(t *testing.T) {
	const gate = "model:c1:m"
	// A long OpTimeout: at load 25 one acquire script took past the default
	// 500 ms and the replica went fail-open, which is not what this tests.
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{OpTimeout: 5 * time.Second})
	base := admission.Request{Gates: path("connection:c1", gate), MaxWait: 60 * time.Second}
	holder := mustTryAcquire(t, reps[0], base)
	queued := func() int { return zcard(t, reps[0].rdb, reps[0].keys.queue(gate)) }

	type admitted struct {
		name string
		p    admission.Grant
	}
	admits := make(chan admitted, 101)
	var wg sync.WaitGroup
	for i := range 100 {
		req := base
		req.Client = "A"
		wg.Go(func() {
			p, err := reps[i%2].Acquire(t.Context(), req)
			if err != nil {
				t.Errorf("A%d: %v", i, err)
				return
			}
			admits <- admitted{"A", p}
		})
	}
	waitFor(t, 20*time.Second, "100 waiters of A queued", func() bool { return queued() == 100 })

	// C's 20 waiters queue behind A's turn, and time out.
	var timedOut atomic.Int64
	var cw sync.WaitGroup
	for i := range 20 {
		req := base
		req.Client, req.MaxWait = "C", 300*time.Millisecond
		cw.Go(func() {
			_, err := reps[i%2].Acquire(t.Context(), req)
			var ae *admission.Error
			if !errors.As(err, &ae) || ae.Code != admission.CodeTimeout {
				t.Errorf("C%d: %v, want a timeout (the gate is held)", i, err)
				return
			}
			timedOut.Add(1)
		})
	}
	cw.Wait()
	if n := timedOut.Load(); n != 20 {
		t.Fatalf("%d of C's waiters timed out, want 20", n)
	}
	if n := queued(); n != 100 {
		t.Fatalf("queue after C's timeouts = %d, want A's 100", n)
	}

	reqC := base
	reqC.Client = "C"
	wg.Go(func() {
		p, err := reps[1].Acquire(t.Context(), reqC)
		if err != nil {
			t.Errorf("C: %v", err)
			return
		}
		admits <- admitted{"C", p}
	})
	waitFor(t, 10*time.Second, "C's request queued", func() bool { return queued() == 101 })
	next := func() admitted {
		select {
		case a := <-admits:
			return a
		case <-time.After(20 * time.Second):
			t.Fatal("no admission within 20s")
			return admitted{}
		}
	}
	holder.Release()
	after := 0
	for {
		a := next()
		after++
		a.p.Release()
		if a.name == "C" {
			break
		}
		if after > 30 {
			t.Fatalf("C not admitted within 30 admissions")
		}
	}
	t.Logf("C admitted as admission %d after its arrival", after)
	if after > 2 {
		t.Errorf("C admitted as the %d. admission after its arrival, want ≤ 2: its timed-out waiters must give its turn back", after)
	}
	for range 100 - (after - 1) {
		next().p.Release()
	}
	wg.Wait()
}

// TestShareUnderTimeouts (issue 23, item 4): on a cap-1 gate shared by two
// replicas, 4 clients of key A wait as long as it takes while 12 clients of
// key B give up after 150 ms and ask again at once. Both keys have weight
// 1, so B's share of the first 200 admissions must stay near half: at
// least 40 % (before the fix B's timed-out waiters kept their turns and B
// got 13 %). Each admitted request holds the gate 5 ms, as an upstream call
// would; the pass mark is a count of admissions, not a time.
func TestShareUnderTimeouts(t *testing.T) {
	const gate = "model:c1:m"
	const total = 200
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{})
	base := admission.Request{Gates: path("connection:c1", gate)}
	var seq, bAdmits, bTimeouts atomic.Int64
	var wg sync.WaitGroup
	for i := range 16 {
		req := base
		req.Client, req.MaxWait = "A", 60*time.Second
		if i >= 4 {
			req.Client, req.MaxWait = "B", 150*time.Millisecond
		}
		c := reps[i%2]
		wg.Go(func() {
			for seq.Load() < total {
				p, err := c.Acquire(t.Context(), req)
				var ae *admission.Error
				switch {
				case errors.As(err, &ae) && ae.Code == admission.CodeTimeout && req.Client == "B":
					bTimeouts.Add(1)
					continue
				case err != nil:
					t.Errorf("%s: %v", req.Client, err)
					return
				}
				if n := seq.Add(1); n <= total && req.Client == "B" {
					bAdmits.Add(1)
				}
				time.Sleep(5 * time.Millisecond) // the upstream call being admitted
				p.Release()
			}
		})
	}
	wg.Wait()
	b := bAdmits.Load()
	share := float64(b) / total
	t.Logf("first %d admissions: B %d (%.0f %%), A %d; B's timeouts %d", total, b, 100*share, total-b, bTimeouts.Load())
	if share < 0.4 {
		t.Errorf("B got %d of %d admissions (%.0f %%), want ≥ 40 %%: a key whose waiters time out keeps its share", b, total, 100*share)
	}
	if b == total {
		t.Errorf("B got every admission: A (waiting, weight 1) must get its share too")
	}
}
