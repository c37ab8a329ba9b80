package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/google/go-cmp/cmp"
)

// TestFairShareAcrossReplicas: keys A (weight 1) and B (weight 3), twelve
// clients each, spread over two replicas, all backlogged on one cap-4
// gate. Of the first 200 admissions B gets 3 for each of A's, within 20%;
// when the queue has emptied the gate keeps no fair state in Redis.
func TestFairShareAcrossReplicas(t *testing.T) {
	const gate = "model:c1:m"
	const total = 200
	// A long OpTimeout: a script slowed past 500 ms by a loaded machine would
	// turn a replica fail-open, which is not what this tests.
	reps := replicas(t, 2, map[string]int{gate: 4}, Options{OpTimeout: 5 * time.Second})
	base := admission.Request{Gates: path("connection:c1", gate), MaxWait: 60 * time.Second}
	var held []admission.Grant
	for range 4 {
		held = append(held, mustTryAcquire(t, reps[0], base))
	}

	var seq atomic.Int64
	var got [2]atomic.Int64 // admissions of A, B among the first total
	var wg sync.WaitGroup
	for i := range 24 {
		key, weight := "A", 1
		if i%2 == 1 {
			key, weight = "B", 3
		}
		req := base
		req.Client, req.Weight = key, weight
		c := reps[(i/2)%2]
		wg.Go(func() {
			for {
				p, err := c.Acquire(t.Context(), req)
				if err != nil {
					t.Errorf("key %s: %v", key, err)
					return
				}
				n := seq.Add(1)
				if n <= total {
					got[weight/3].Add(1)
				}
				p.Release()
				if n >= total {
					return
				}
			}
		})
	}
	waitFor(t, 10*time.Second, "24 waiters queued", func() bool { return zcard(t, reps[0].rdb, reps[0].keys.queue(gate)) == 24 })
	for _, p := range held {
		p.Release()
	}
	wg.Wait()
	a, b := got[0].Load(), got[1].Load()
	t.Logf("first %d admissions: A (weight 1) %d, B (weight 3) %d, B/A = %.2f", total, a, b, float64(b)/float64(max(a, 1)))
	if a == 0 || float64(b)/float64(a) < 2.4 || float64(b)/float64(a) > 3.6 {
		t.Errorf("B/A = %d/%d, want 3 ± 20%% (weights 1:3)", b, a)
	}
	waitFor(t, 10*time.Second, "the queue to empty", func() bool { return zcard(t, reps[0].rdb, reps[0].keys.queue(gate)) == 0 })
	if n, err := reps[0].rdb.Exists(t.Context(), reps[0].keys.fair(gate)).Result(); err != nil || n != 0 {
		t.Errorf("fair state of %s after its queue emptied: EXISTS = %d, %v; want 0", gate, n, err)
	}
}

// TestFairTagOrder: on a cap-1 gate held by one request, key A (weight 1)
// queues four waiters and then key B (weight 3) six, alternating between
// two replicas. Start-time fair queueing admits by tag: A's are 0, 1, 2, 3
// (in units of one weight-1 admission) and B's 0, ⅓, ⅔, 1-, 1⅓-, 1⅔- (B
// starts at the gate's virtual time: its idle past earns it nothing, and
// costs it nothing). So the first five admitted are A1 and B1–B4, and then
// A2, B5, B6, A3, A4; within each key, arrival order.
func TestFairTagOrder(t *testing.T) {
	const gate = "model:c1:m"
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{})
	base := admission.Request{Gates: path("connection:c1", gate), MaxWait: 20 * time.Second}
	holder := mustTryAcquire(t, reps[0], base)

	order := make(chan string, 10)
	var wg sync.WaitGroup
	var names []string
	for i := range 10 {
		req := base
		name := fmt.Sprintf("A%d", i+1)
		req.Client, req.Weight = "A", 1
		if i >= 4 {
			name = fmt.Sprintf("B%d", i-3)
			req.Client, req.Weight = "B", 3
		}
		names = append(names, name)
		c := reps[i%2]
		wg.Go(func() {
			p, err := c.Acquire(t.Context(), req)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				order <- name + " failed"
				return
			}
			order <- name
			p.Release()
		})
		waitFor(t, 5*time.Second, name+" queued", func() bool { return zcard(t, reps[0].rdb, reps[0].keys.queue(gate)) == i+1 })
	}
	holder.Release()
	wg.Wait()
	close(order)
	var got []string
	for name := range order {
		got = append(got, name)
	}
	if len(got) != 10 {
		t.Fatalf("admitted %v, want all of %v", got, names)
	}
	first := slices.Clone(got[:5])
	slices.Sort(first)
	if diff := cmp.Diff([]string{"A1", "B1", "B2", "B3", "B4"}, first); diff != "" {
		t.Errorf("first five admitted (sorted) mismatch (-want +got):\n%s\n(order %v)", diff, got)
	}
	if diff := cmp.Diff([]string{"A2", "B5", "B6", "A3", "A4"}, got[5:]); diff != "" {
		t.Errorf("admissions 6–10 mismatch (-want +got):\n%s\n(order %v)", diff, got)
	}
	for _, key := range []string{"A", "B"} {
		var mine []string
		for _, name := range got {
			if strings.HasPrefix(name, key) {
				mine = append(mine, name)
			}
		}
		if !slices.IsSortedFunc(mine, func(x, y string) int { return strings.Compare(x, y) }) {
			t.Errorf("key %s admitted out of arrival order: %v", key, mine)
		}
	}
}

// TestFairStateDroppedWithQueue: a waiter that times out, leaving its
// gate's queue empty, takes the gate's fair state with it; while one still
// waits the state is there: its key's turn, starting at 0.
func TestFairStateDroppedWithQueue(t *testing.T) {
	const gate = "connection:c1"
	c := replicas(t, 1, map[string]int{gate: 1}, Options{})[0]
	holder := mustTryAcquire(t, c, admission.Request{Gates: path(gate)})
	long := acquireAsync(t.Context(), c, admission.Request{Gates: path(gate), MaxWait: 30 * time.Second, Client: "A", Weight: 2})
	waitFor(t, 5*time.Second, "the waiter queued", func() bool { return zcard(t, c.rdb, c.keys.queue(gate)) == 1 })
	turn := fmt.Sprintf("%016d\x01c:A", tagCost(2))
	if s, err := c.rdb.ZScore(t.Context(), c.keys.turns(gate), turn).Result(); err != nil || s != 0 {
		t.Errorf("A's turn %q = %v, %v; want start 0", turn, s, err)
	}
	if m, err := c.rdb.HGet(t.Context(), c.keys.fair(gate), "lc:A").Result(); err != nil || m != turn {
		t.Errorf("A's turn in the fair state = %q, %v; want %q", m, err, turn)
	}
	short := acquireAsync(t.Context(), c, admission.Request{Gates: path(gate), MaxWait: 50 * time.Millisecond, Client: "B"})
	var ae *admission.Error
	if r := recv(t, short, 5*time.Second); !errors.As(r.err, &ae) || ae.Code != admission.CodeTimeout {
		t.Fatalf("short waiter: %v, want a timeout", r.err)
	}
	if n, _ := c.rdb.Exists(t.Context(), c.keys.fair(gate)).Result(); n != 1 {
		t.Errorf("fair state gone while A still waits")
	}
	holder.Release()
	if r := recv(t, long, 5*time.Second); r.err != nil {
		t.Fatalf("long waiter: %v", r.err)
	} else {
		r.p.Release()
	}
	if n, err := c.rdb.Exists(t.Context(), c.keys.fair(gate)).Result(); err != nil || n != 0 {
		t.Errorf("fair state after the queue emptied: EXISTS = %d, %v; want 0", n, err)
	}
	// A timeout that empties the queue drops it too.
	holder = mustTryAcquire(t, c, admission.Request{Gates: path(gate)})
	defer holder.Release()
	if r := recv(t, acquireAsync(t.Context(), c, admission.Request{Gates: path(gate), MaxWait: 50 * time.Millisecond, Client: "B"}), 5*time.Second); !errors.As(r.err, &ae) {
		t.Fatalf("waiter: %v, want a timeout", r.err)
	}
	if n, err := c.rdb.Exists(t.Context(), c.keys.fair(gate)).Result(); err != nil || n != 0 {
		t.Errorf("fair state after the last waiter timed out: EXISTS = %d, %v; want 0", n, err)
	}
}

// TestRetriedAdmissionIsAdmitted: an acquire script run twice for one
// attempt (go-redis retries a call whose reply was lost) admits it once:
// the second run finds its own leases and does not queue it behind itself
// on the gate it fills.
func TestRetriedAdmissionIsAdmitted(t *testing.T) {
	const gate = "connection:c1"
	c := replicas(t, 1, map[string]int{gate: 1}, Options{})[0]
	req := admission.Request{Gates: path("global", gate), Client: "A"}
	w, err := c.begin(req)
	if err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		out, err := c.attempt(w, req, false)
		if err != nil {
			t.Fatal(err)
		}
		if out.status != stAdmitted {
			t.Fatalf("run %d: status %d, want admitted", run+1, out.status)
		}
	}
	if n := zcard(t, c.rdb, c.keys.holders(gate)); n != 1 {
		t.Errorf("holders of %s = %d, want 1", gate, n)
	}
	if n := zcard(t, c.rdb, c.keys.queue(gate)); n != 0 {
		t.Errorf("queue of %s = %d, want 0", gate, n)
	}
	c.grant(w, 0).Release()
	if n := zcard(t, c.rdb, c.keys.holders(gate)); n != 0 {
		t.Errorf("holders of %s after release = %d, want 0", gate, n)
	}
}

// TestQueuedByClient: each replica's Stats split the waiters it has parked
// on a gate by client key (its own waiters only; Queued stays the
// cluster-wide count).
func TestQueuedByClient(t *testing.T) {
	const gate = "connection:c1"
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{})
	holder := mustTryAcquire(t, reps[0], admission.Request{Gates: path(gate)})
	defer holder.Release()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var chans []<-chan result
	for i, w := range []struct {
		rep    int
		client string
	}{{0, "A"}, {0, "A"}, {0, "B"}, {1, "C"}} {
		chans = append(chans, acquireAsync(ctx, reps[w.rep], admission.Request{Gates: path(gate), MaxWait: 30 * time.Second, Client: w.client}))
		waitFor(t, 5*time.Second, "waiter queued", func() bool { return zcard(t, reps[0].rdb, reps[0].keys.queue(gate)) == i+1 })
	}
	byClient := func(c *Controller) map[string]int {
		for _, s := range c.Stats() {
			if s.Key == gate {
				return s.QueuedByClient
			}
		}
		return nil
	}
	if diff := cmp.Diff(map[string]int{"A": 2, "B": 1}, byClient(reps[0])); diff != "" {
		t.Errorf("replica 0 QueuedByClient mismatch (-want +got):\n%s", diff)
	}
	waitFor(t, 5*time.Second, "replica 1's waiter parked", func() bool { return byClient(reps[1])["C"] == 1 })
	if diff := cmp.Diff(map[string]int{"C": 1}, byClient(reps[1])); diff != "" {
		t.Errorf("replica 1 QueuedByClient mismatch (-want +got):\n%s", diff)
	}
	cancel()
	for _, ch := range chans {
		if r := recv(t, ch, 5*time.Second); !errors.Is(r.err, context.Canceled) {
			t.Errorf("waiter: %v, want context.Canceled", r.err)
		}
	}
	if got := byClient(reps[0]); got != nil {
		t.Errorf("replica 0 QueuedByClient after every waiter left = %v, want nil", got)
	}
}

// TestNewcomerBoundAcrossReplicas: key A has 100 waiters, spread over two
// replicas, on a cap-1 gate; each admitted request holds the slot until the
// test lets it go. After a few admissions a request of key C (no waiters)
// arrives: it is admitted within the next ⌈1 ÷ 1⌉ + 1 = 2 admissions of
// the gate (DESIGN's bound; counted, not timed).
func TestNewcomerBoundAcrossReplicas(t *testing.T) {
	const gate = "model:c1:m"
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{})
	base := admission.Request{Gates: path("connection:c1", gate), MaxWait: 60 * time.Second}
	holder := mustTryAcquire(t, reps[0], base)

	type admitted struct {
		name string
		p    admission.Grant
	}
	admits := make(chan admitted, 101)
	acquire := func(c *Controller, name string, req admission.Request) {
		p, err := c.Acquire(t.Context(), req)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		admits <- admitted{name, p}
	}
	var wg sync.WaitGroup
	for i := range 100 {
		req := base
		req.Client = "A"
		wg.Go(func() { acquire(reps[i%2], fmt.Sprintf("A%d", i), req) })
	}
	waitFor(t, 10*time.Second, "100 waiters queued", func() bool { return zcard(t, reps[0].rdb, reps[0].keys.queue(gate)) == 100 })
	next := func() admitted {
		select {
		case a := <-admits:
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("no admission within 10s")
			return admitted{}
		}
	}
	holder.Release()
	for range 5 {
		next().p.Release()
	}
	// The 6th admission holds the gate; 94 of A wait when C arrives.
	sixth := next()
	reqC := base
	reqC.Client = "C"
	wg.Go(func() { acquire(reps[1], "C", reqC) })
	waitFor(t, 10*time.Second, "C queued", func() bool { return zcard(t, reps[0].rdb, reps[0].keys.queue(gate)) == 95 })
	sixth.p.Release()
	after := 0
	for {
		a := next()
		after++
		a.p.Release()
		if a.name == "C" {
			break
		}
		if after > 10 {
			t.Fatalf("C not admitted within 10 admissions after its arrival")
		}
	}
	if after > 2 {
		t.Errorf("C admitted as the %d. admission after its arrival, want ≤ 2 (⌈1 ÷ 1⌉ + 1)", after)
	}
	t.Logf("C admitted as admission %d after its arrival", after)
	// Let the rest of A through.
	for range 100 - 6 - (after - 1) {
		next().p.Release()
	}
	wg.Wait()
}
